package caddymodule

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

// setIdentityHeaders replaces any copy of the identity headers with the token's.
func setIdentityHeaders(h http.Header, claims *bearer.Claims) {
	h.Del(HeaderSub)
	h.Del(HeaderScope)
	h.Del(HeaderClientID)
	h.Set(HeaderSub, claims.Subject)
	h.Set(HeaderScope, claims.Scope)
	h.Set(HeaderClientID, claims.ClientID)
}

// refusal is an RFC 6750 answer to a request without a usable token.
type refusal struct {
	status    int
	challenge string
	body      oauthErrorBody
	err       error
}

func (f *refusal) write(w http.ResponseWriter, logger *zap.Logger) {
	if f.status >= 500 {
		logger.Warn("palmgate_bearer: cannot verify tokens", zap.Error(f.err))
	}
	if f.challenge != "" {
		w.Header().Set("WWW-Authenticate", f.challenge)
	}
	if f.status == http.StatusServiceUnavailable {
		d, ok := retryAfter(f.err)
		if !ok {
			d = storageRetryAfter
		}
		setRetryAfter(w, d)
	}
	writeJSON(w, f.status, f.body)
}

// checkBearer verifies the request's bearer token and required scopes.
func checkBearer(r *http.Request, v *bearer.Verifier, scopes []string, realm string) (*bearer.Claims, *refusal) {
	token, ok := bearerToken(r)
	if !ok {
		return nil, &refusal{status: http.StatusUnauthorized, challenge: `Bearer realm="` + realm + `"`,
			body: oauthErrorBody{Error: "invalid_request", Description: "a bearer access token is required"}}
	}
	claims, err := v.Verify(r.Context(), token)
	switch {
	case errors.Is(err, bearer.ErrIssuerUnavailable):
		return nil, &refusal{status: http.StatusServiceUnavailable, err: err,
			body: oauthErrorBody{Error: "temporarily_unavailable", Description: "the token issuer cannot be reached"}}
	case err != nil:
		return nil, &refusal{status: http.StatusUnauthorized,
			challenge: `Bearer realm="` + realm + `", error="invalid_token", error_description="the access token is invalid, expired or revoked"`,
			body:      oauthErrorBody{Error: "invalid_token", Description: "the access token is invalid, expired or revoked"}}
	case !claims.HasScopes(scopes...):
		need := strings.Join(scopes, " ")
		challenge := `Bearer realm="` + realm + `", error="insufficient_scope"`
		if strings.IndexFunc(need, notScopeChar) < 0 {
			// Only scope tokens go into the quoted string: a requested scope (the
			// query of /oauth2/check) may hold quotes or control characters.
			challenge += `, scope="` + need + `"`
		}
		return nil, &refusal{status: http.StatusForbidden, challenge: challenge,
			body: oauthErrorBody{Error: "insufficient_scope", Description: "the token lacks scope " + need}}
	}
	return claims, nil
}

// notScopeChar reports a character that is neither in RFC 6749's scope-token syntax
// (%x21 / %x23-5B / %x5D-7E) nor the space between scope tokens.
func notScopeChar(c rune) bool {
	return c != ' ' && (c < 0x21 || c > 0x7E || c == '"' || c == '\\')
}
