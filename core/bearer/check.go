package bearer

import (
	"context"
	"errors"
	"strings"

	"github.com/palmgate/palmgate/core/fault"
)

// RFC 6750 3.1 error codes of a refused bearer request, and OAuth's code of a
// temporary refusal.
const (
	CodeInvalidRequest         = "invalid_request"
	CodeInvalidToken           = "invalid_token"
	CodeInsufficientScope      = "insufficient_scope"
	CodeTemporarilyUnavailable = "temporarily_unavailable"
)

// ErrNoToken is the kind of the refusal of a request that carries no bearer token:
// its challenge names no error (RFC 6750 3.1: a request without authentication
// information gets none).
var ErrNoToken = &fault.Error{Class: fault.Unauthorized, Code: CodeInvalidRequest, Message: "a bearer access token is required"}

// Check decides a request that presents token ("" for none) to a resource that
// requires audience (when not "") and every scope of scopes, RFC 6750's decisions
// in one place: the token must pass every check of the verifier (Verify), then
// hold the audience (a token for another resource is invalid here, whatever its
// scopes), then the scopes. It returns the claims or a fault: Unauthorized
// (ErrNoToken, or invalid_token), Forbidden insufficient_scope (Details["scope"]:
// the scopes required, space-separated), or Unavailable temporarily_unavailable
// with a Retry-After when the issuer's keys or the revocations cannot be checked
// (Kind: the cause).
func (v *Verifier) Check(ctx context.Context, token, audience string, scopes []string) (*Claims, error) {
	if token == "" {
		return nil, fault.Of(ErrNoToken, "%s", ErrNoToken.Message)
	}
	claims, err := v.VerifyFor(ctx, token, audience)
	switch {
	case errors.Is(err, ErrWrongAudience):
		return nil, &fault.Error{Class: fault.Unauthorized, Code: CodeInvalidToken, Message: "the access token was issued for another audience", Kind: err}
	case errors.Is(err, ErrIssuerUnavailable):
		return nil, &fault.Error{Class: fault.Unavailable, Code: CodeTemporarilyUnavailable,
			Message: "the token issuer cannot be reached", RetryAfter: fault.StorageRetryAfter, Kind: err}
	case err != nil:
		return nil, &fault.Error{Class: fault.Unauthorized, Code: CodeInvalidToken, Message: "the access token is invalid, expired or revoked", Kind: err}
	case !claims.HasScopes(scopes...):
		need := strings.Join(scopes, " ")
		return nil, &fault.Error{Class: fault.Forbidden, Code: CodeInsufficientScope,
			Message: "the token lacks scope " + need, Details: map[string]any{"scope": need}}
	}
	return claims, nil
}
