package edge

import (
	"errors"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/bearer"
)

// Identity headers palmgate sets on admitted requests (and on /oauth2/check
// answers). Client-sent copies are always deleted first.
const (
	HeaderSub      = "X-Palmgate-Sub"
	HeaderScope    = "X-Palmgate-Scope"
	HeaderClientID = "X-Palmgate-Client-Id"
)

// SetIdentityHeaders replaces any copy of the identity headers with the token's.
func SetIdentityHeaders(h http.Header, claims *bearer.Claims) {
	h.Del(HeaderSub)
	h.Del(HeaderScope)
	h.Del(HeaderClientID)
	h.Set(HeaderSub, claims.Subject)
	h.Set(HeaderScope, claims.Scope)
	h.Set(HeaderClientID, claims.ClientID)
}

// Refusal is an RFC 6750 answer to a request without a usable token: 401 with a
// challenge, 403 insufficient_scope, or 503 when tokens cannot be checked.
type Refusal struct {
	// Status is the HTTP status: 401, 403 or 503.
	Status int
	// Challenge is the WWW-Authenticate header, "" for none.
	Challenge string
	// Code and Description are the OAuth error of the body.
	Code, Description string
	// Err is the cause of a 503.
	Err error
}

// Error describes the refusal (for logs).
func (f *Refusal) Error() string {
	if f.Err != nil {
		return f.Description + ": " + f.Err.Error()
	}
	return f.Code + ": " + f.Description
}

// Unwrap returns the cause of a 503.
func (f *Refusal) Unwrap() error { return f.Err }

// SetHeaders sets the refusal's WWW-Authenticate and, on a 503, Retry-After.
func (f *Refusal) SetHeaders(h http.Header) {
	if f.Challenge != "" {
		h.Set("WWW-Authenticate", f.Challenge)
	}
	if f.Status == http.StatusServiceUnavailable {
		d, ok := retryAfter(f.Err)
		if !ok {
			d = storageRetryAfter
		}
		h.Set("Retry-After", retryAfterValue(d))
	}
}

// Write answers the refusal with its headers and the OAuth JSON error body.
func (f *Refusal) Write(w http.ResponseWriter, logger *zap.Logger) {
	if f.Status >= 500 {
		logger.Warn("palmgate_bearer: cannot verify tokens", zap.Error(f.Err))
	}
	f.SetHeaders(w.Header())
	writeJSON(w, f.Status, oauthErrorBody{Error: f.Code, Description: f.Description})
}

// audienceRefusal refuses a valid token issued for another audience.
func audienceRefusal(realm string) *Refusal {
	const desc = "the access token was issued for another audience"
	return &Refusal{Status: http.StatusUnauthorized,
		Challenge: `Bearer realm="` + realm + `", error="invalid_token", error_description="` + desc + `"`,
		Code:      "invalid_token", Description: desc}
}

// CheckBearer verifies the request's bearer token with the verifier's every check,
// then its audience when audience is not "" (a token for another resource is
// invalid here, whatever its scopes), then the required scopes.
func CheckBearer(r *http.Request, v *bearer.Verifier, audience string, scopes []string, realm string) (*bearer.Claims, *Refusal) {
	token, ok := bearerToken(r)
	if !ok {
		return nil, &Refusal{Status: http.StatusUnauthorized, Challenge: `Bearer realm="` + realm + `"`,
			Code: "invalid_request", Description: "a bearer access token is required"}
	}
	claims, err := v.VerifyFor(r.Context(), token, audience)
	switch {
	case errors.Is(err, bearer.ErrWrongAudience):
		return nil, audienceRefusal(realm)
	case errors.Is(err, bearer.ErrIssuerUnavailable):
		return nil, &Refusal{Status: http.StatusServiceUnavailable, Err: err,
			Code: "temporarily_unavailable", Description: "the token issuer cannot be reached"}
	case err != nil:
		return nil, &Refusal{Status: http.StatusUnauthorized,
			Challenge: `Bearer realm="` + realm + `", error="invalid_token", error_description="the access token is invalid, expired or revoked"`,
			Code:      "invalid_token", Description: "the access token is invalid, expired or revoked"}
	case !claims.HasScopes(scopes...):
		need := strings.Join(scopes, " ")
		challenge := `Bearer realm="` + realm + `", error="insufficient_scope"`
		if strings.IndexFunc(need, notScopeChar) < 0 {
			// Only scope tokens go into the quoted string: a requested scope (the
			// query of /oauth2/check) may hold quotes or control characters.
			challenge += `, scope="` + need + `"`
		}
		return nil, &Refusal{Status: http.StatusForbidden, Challenge: challenge,
			Code: "insufficient_scope", Description: "the token lacks scope " + need}
	}
	return claims, nil
}

// notScopeChar reports a character that is neither in RFC 6749's scope-token syntax
// (%x21 / %x23-5B / %x5D-7E) nor the space between scope tokens.
func notScopeChar(c rune) bool {
	return c != ' ' && (c < 0x21 || c > 0x7E || c == '"' || c == '\\')
}
