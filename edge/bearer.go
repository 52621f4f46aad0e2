package edge

import (
	"errors"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/oidc"
)

// Identity headers palmgate sets on admitted requests (and on /oauth2/check
// answers). Client-sent copies are always deleted first.
const (
	HeaderSub      = "X-Palmgate-Sub"
	HeaderScope    = "X-Palmgate-Scope"
	HeaderClientID = "X-Palmgate-Client-Id"
	// HeaderAgentID is the deviceId of the agent acting for the subject (a token
	// with `act`); absent for a person's own token.
	HeaderAgentID = "X-Palmgate-Agent-Id"
)

// SetIdentityHeaders replaces any copy of the identity headers with the token's.
// A copy is any header whose name is an identity header's with '_' for '-' in
// any case (X_Palmgate_Sub): net/http keeps it apart, but CGI, FastCGI (Caddy's
// php_fastcgi), WSGI and Rack upstreams read it as the same variable.
func SetIdentityHeaders(h http.Header, claims *bearer.Claims) {
	DeleteIdentityHeaders(h)
	PutIdentityHeaders(h, claims)
}

// PutIdentityHeaders sets the token's identity headers on h, from which
// DeleteIdentityHeaders has already removed every copy (palmgate_bearer deletes
// them before deciding, so it does not scan the header twice).
func PutIdentityHeaders(h http.Header, claims *bearer.Claims) {
	// Assigned, not Set: the names are canonical already (TestIdentityHeaderNamesCanonical),
	// and Set would check them again on every admitted request.
	if id := claims.AgentID(); id != "" {
		h[HeaderAgentID] = []string{id}
	}
	h[HeaderSub] = []string{claims.Subject}
	h[HeaderScope] = []string{claims.Scope}
	h[HeaderClientID] = []string{claims.ClientID}
}

// DeleteIdentityHeaders deletes every copy of the identity headers (see
// SetIdentityHeaders): palmgate_bearer does so before deciding a request, so that
// one it refuses reaches handle_errors without them.
func DeleteIdentityHeaders(h http.Header) {
	for name := range h {
		if isIdentityHeader(name) {
			delete(h, name)
		}
	}
}

// isIdentityHeader reports whether name is an identity header's name once case
// is ignored and '_' read as '-'.
func isIdentityHeader(name string) bool {
	const prefix = "x-palmgate-"
	if len(name) <= len(prefix) || !sameHeaderName(name[:len(prefix)], prefix) {
		return false
	}
	for _, h := range [...]string{HeaderSub, HeaderScope, HeaderClientID, HeaderAgentID} {
		if sameHeaderName(name, h) {
			return true
		}
	}
	return false
}

// sameHeaderName compares two header names as CGI-style upstreams do: ASCII case
// folded, '_' and '-' alike.
func sameHeaderName(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x == '_' {
			x = '-'
		}
		if y == '_' {
			y = '-'
		}
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// CheckBearer reads the request's bearer token and decides it with the
// verifier's RFC 6750 rules (bearer.Verifier.Check: every check of the verifier,
// then audience when not "", then the scopes). It returns the claims, or the
// refusal as a fault for SetChallenge or writeChallenge.
func CheckBearer(r *http.Request, v *bearer.Verifier, audience string, scopes []string) (*bearer.Claims, error) {
	// Read by its canonical name, as Values and Get read it, without their
	// canonicalizing it again (every admitted request comes here).
	auth := r.Header["Authorization"]
	if len(auth) > 1 {
		// The check would judge the first, the upstream may read another (RFC
		// 6750 3.1: a request that repeats the credentials is invalid_request).
		return nil, &fault.Error{Class: fault.Invalid, Code: bearer.CodeInvalidRequest, Message: "the request has more than one Authorization header"}
	}
	var authorization string
	if len(auth) == 1 {
		authorization = auth[0]
	}
	if authorization != "" && strings.Contains(r.URL.RawQuery, "access_token") && r.URL.Query().Has("access_token") {
		// RFC 6750 2: one method per request. The header's token would be judged
		// and the query's passed on, unchecked, to an upstream that may read it.
		return nil, &fault.Error{Class: fault.Invalid, Code: bearer.CodeInvalidRequest, Message: "the request sends an access token both in the Authorization header and in the query"}
	}
	token, ok := bearerToken(authorization)
	if !ok {
		token = ""
	}
	return v.Check(r.Context(), token, audience, scopes)
}

// SetChallenge is the RFC 6750 dialect's mapper for headers: it sets the
// WWW-Authenticate challenge of realm for a refused bearer request (no error for a
// request without a token; error and error_description for invalid_token; error
// and the required scope for insufficient_scope), or Retry-After for a temporary
// refusal, and returns the status: the fault's class's, 500 for an error that is
// no fault. The body, where there is one, is writeChallenge's.
func SetChallenge(h http.Header, realm string, err error) int {
	f, ok := fault.As(err)
	if !ok || f.Class == fault.Internal {
		return http.StatusInternalServerError
	}
	challenge := `Bearer realm="` + realm + `"`
	switch {
	case f.Class == fault.Unavailable || f.Class == fault.TooMany:
		if f.RetryAfter > 0 {
			h.Set("Retry-After", retryAfterValue(f.RetryAfter))
		}
		return Status(f.Class)
	case errors.Is(err, bearer.ErrNoToken):
	case f.Class == fault.Forbidden:
		challenge += `, error="` + f.Code + `"`
		// Only scope tokens go into the quoted string: a requested scope (the
		// query of /oauth2/check) may hold quotes or control characters.
		if need, _ := f.Details["scope"].(string); need != "" && strings.IndexFunc(need, notScopeChar) < 0 {
			challenge += `, scope="` + need + `"`
		}
	default:
		// RFC 6750 3: error_description keeps to %x20-21 / %x23-5B / %x5D-7E, so
		// a message that quotes the request cannot end the quoted string.
		challenge += `, error="` + challengeCode(f.Code) + `", error_description="` + oidc.DescriptionChars(f.Message) + `"`
	}
	h.Set("WWW-Authenticate", challenge)
	return Status(f.Class)
}

// challengeCode is the RFC 6750 3.1 error code of a refusal of code: itself when
// it is one of the three (invalid_request, invalid_token, insufficient_scope),
// otherwise invalid_request (the edge's body_too_large: a malformed request, as
// the token endpoint answers it too).
func challengeCode(code string) string {
	switch code {
	case bearer.CodeInvalidRequest, bearer.CodeInvalidToken, bearer.CodeInsufficientScope:
		return code
	}
	return bearer.CodeInvalidRequest
}

// writeChallenge answers a refused bearer request (CheckBearer's error): the
// headers of SetChallenge and the OAuth JSON error body, temporarily_unavailable
// for a temporary refusal and server_error for what is no fault (both logged).
func writeChallenge(w http.ResponseWriter, realm string, err error, logger *zap.Logger) {
	status := SetChallenge(w.Header(), realm, err)
	body := oauthErrorBody{Error: "server_error", Description: "internal server error"}
	if f, ok := fault.As(err); ok && f.Class != fault.Internal {
		body = oauthErrorBody{Error: f.Code, Description: f.Message}
		if f.Class != fault.Unavailable && f.Class != fault.TooMany {
			body.Error = challengeCode(f.Code) // the challenge's code (SetChallenge)
		}
	}
	if status >= 500 {
		logger.Warn("palmgate_bearer: cannot verify tokens", zap.Error(Cause(err)))
	}
	writeJSON(w, status, body)
}

// Cause is what to log of a refusal the server is at fault for: the cause a
// temporary refusal wraps (the issuer's or the store's error), or err itself.
func Cause(err error) error {
	if cause := errors.Unwrap(err); cause != nil {
		return cause
	}
	return err
}

// notScopeChar reports a character that is neither in RFC 6749's scope-token syntax
// (%x21 / %x23-5B / %x5D-7E) nor the space between scope tokens.
func notScopeChar(c rune) bool {
	return c != ' ' && (c < 0x21 || c > 0x7E || c == '"' || c == '\\')
}
