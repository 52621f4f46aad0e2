package edge

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/oidc"
)

// CORS for browser apps (issue 21). A single-page app calls discovery, the JWKS,
// the token, userinfo and revocation endpoints from its own origin; each client
// has allowed origins (core/oidc public.go). The rules:
//
//   - An Origin that is not allowed gets no CORS header at all (the browser then
//     hides the answer from the page).
//   - Never `*` and never Access-Control-Allow-Credentials: the allowed origin is
//     echoed, with Vary: Origin, and no endpoint here reads cookies.
//   - (Fourth review) The public documents (discovery at its three paths, RFC
//     9728 resource metadata, the JWKS) answer any origin: they carry no
//     credential and any server reads them anyway, and a browser app whose origin
//     no configured client lists (a client ID metadata document's, an MCP client
//     before it registers) must read them first. The union of the clients'
//     origins, which they answered before, could never list a document's origin.
//   - (Fourth review) The public reads of /v1 (verify/signature, the two
//     lookups, the leaderboard) answer any origin too: the spec lets anyone call
//     them, they carry no credential and read no cookie, so a dashboard or a
//     verifier widget on its own origin may read them. The other /v1 routes do
//     not: registration init and status carry a capability (the session id a
//     page on another origin has no business polling or minting from a visitor's
//     address), and the registration page, its decline, the agents page and its
//     forms and the scan routes are palmgate's own pages and their cookies.
//   - The registration endpoint answers loopback origins only (a local MCP
//     client's page, such as the MCP Inspector's): a page on the web could
//     otherwise make each visitor's browser register a client from the visitor's
//     own address, spreading a flood over as many networks as it has visitors
//     (the per-network cap counts addresses). Not the union either: a client
//     that registered itself put its own redirect URIs' origins there. Its JSON
//     body needs a preflight, so a refused origin's browser sends nothing.
//   - Userinfo answers any origin's preflight (it carries no token, so it cannot
//     be matched to a client) and its errors (they tell a page only about its own
//     request), but its claims only to an origin the token's client allows, as
//     Keycloak does: a page of another client, or a foreign page that got hold of
//     the token, cannot read them.
//   - The token and revocation endpoints answer for the origins of the client the
//     form names (client_id, or Basic credentials): errors before the client is
//     known carry the union's headers, so the app can read them.
//   - A preflight (OPTIONS) answers 204 with Allow-Methods and Allow-Headers
//     (Authorization, Content-Type, MCP-Protocol-Version), cached for corsMaxAge.
//   - Error answers (400, 401, 429, 503) carry the same headers as successes: they
//     are set before the handler runs; so does the 405 of a method the route does
//     not serve (otherMethods).
const corsMaxAge = "600"

// corsAllowedHeaders are the request headers a page may send besides the
// safelisted ones: MCP clients send MCP-Protocol-Version on their discovery
// requests too.
const corsAllowedHeaders = "Authorization, Content-Type, MCP-Protocol-Version"

// corsExposed are the answer headers a page may read besides the safelisted ones.
const corsExposed = "WWW-Authenticate, Retry-After"

// corsUnion serves h with the CORS headers of the union of the clients' allowed
// origins, and answers its preflight; methods are the route's.
func (s *Server) corsUnion(methods string, h http.HandlerFunc) http.HandlerFunc {
	return corsIf(s.originAllowed, methods, h)
}

// corsRegistration serves the registration endpoint with the CORS headers of a
// loopback origin (see above).
func corsRegistration(methods string, h http.HandlerFunc) http.HandlerFunc {
	return corsIf(func(_ *http.Request, origin string) bool { return oidc.LoopbackOrigin(origin) }, methods, h)
}

// corsIf serves h with the CORS headers for the origins allowed admits, and
// answers its preflight; methods are the route's.
func corsIf(allowed func(*http.Request, string) bool, methods string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Origin")
		if origin := r.Header.Get("Origin"); origin != "" && allowed(r, origin) {
			setCORS(w, origin)
		}
		if r.Method == http.MethodOptions {
			answerPreflight(w, r, methods)
			return
		}
		if h != nil {
			h(w, r)
		}
	}
}

// corsAny serves h with the CORS headers for any origin (an http(s) origin in
// canonical form: not `null`), and answers its preflight; methods are the route's.
func corsAny(methods string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Origin")
		if origin := r.Header.Get("Origin"); origin != "" && oidc.CanonicalOrigin(origin) == origin {
			setCORS(w, origin)
		}
		if r.Method == http.MethodOptions {
			answerPreflight(w, r, methods)
			return
		}
		if h != nil {
			h(w, r)
		}
	}
}

// tokenOrigin keeps the CORS headers of an answer carrying what a token gives
// (userinfo's claims) only when the request's origin is one the token's client
// allows, or palmgate's own.
func (s *Server) tokenOrigin(w http.ResponseWriter, r *http.Request, clientID string) {
	origin := r.Header.Get("Origin")
	if origin == "" || origin == s.issuerOrigin() {
		return
	}
	ok, err := s.oidc.Clients().ClientOriginAllowed(r.Context(), clientID, origin)
	if err != nil {
		s.logger.Warn("palmgate: reading the client's allowed origins failed", zap.Error(err))
	}
	if !ok {
		clearCORS(w)
	}
}

// originAllowed reports whether origin is an allowed origin of any client; a
// store failure allows nothing (logged).
func (s *Server) originAllowed(r *http.Request, origin string) bool {
	ok, err := s.oidc.Clients().OriginAllowed(r.Context(), origin)
	if err != nil {
		s.logger.Warn("palmgate: reading the allowed origins failed", zap.Error(err))
	}
	return ok
}

// clientOrigin applies the per-client rule of the token, revocation and
// introspection endpoints once the request's client id is known: the union's CORS
// headers set before (token and revocation; introspection has none) are removed
// when origin is not allowed for clientID. It
// reports whether the request may go on: a request from a browser page whose
// origin the client does not allow is refused before any work (see
// docs/SECURITY.md), as a code or a refresh token spent by a page that cannot
// read the answer is lost to its owner (a reused refresh token revokes its family).
func (s *Server) clientOrigin(w http.ResponseWriter, r *http.Request, clientID string) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || clientID == "" {
		return true
	}
	ok, err := s.oidc.Clients().ClientOriginAllowed(r.Context(), clientID, origin)
	if err != nil {
		s.logger.Warn("palmgate: reading the client's allowed origins failed", zap.Error(err))
	}
	if ok {
		// corsUnion has set the headers on a CORS route, except for a client in no
		// index of the union (a client ID metadata document's): set them here.
		if onCORSRoute(w) {
			setCORS(w, origin)
		}
		return true
	}
	clearCORS(w)
	return origin == s.issuerOrigin() // same-origin: a page of palmgate itself
}

// onCORSRoute reports whether the answer is a CORS route's: corsUnion marks each
// with Vary: Origin (introspection has none).
func onCORSRoute(w http.ResponseWriter) bool {
	return slices.Contains(w.Header().Values("Vary"), "Origin")
}

func setCORS(w http.ResponseWriter, origin string) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Expose-Headers", corsExposed)
}

func clearCORS(w http.ResponseWriter) {
	h := w.Header()
	h.Del("Access-Control-Allow-Origin")
	h.Del("Access-Control-Expose-Headers")
}

// answerPreflight answers an OPTIONS request: 204 with Allow, and, when the CORS
// headers are set (an allowed origin), the methods and headers a page may use.
func answerPreflight(w http.ResponseWriter, r *http.Request, methods string) {
	h := w.Header()
	h.Set("Allow", methods)
	h.Add("Vary", "Access-Control-Request-Method")
	h.Add("Vary", "Access-Control-Request-Headers")
	if h.Get("Access-Control-Allow-Origin") != "" && r.Header.Get("Access-Control-Request-Method") != "" {
		h.Set("Access-Control-Allow-Methods", methods)
		h.Set("Access-Control-Allow-Headers", corsAllowedHeaders)
		h.Set("Access-Control-Max-Age", corsMaxAge)
		h.Del("Access-Control-Expose-Headers") // for actual answers only
	}
	w.WriteHeader(http.StatusNoContent)
}

// issuerOrigin is the origin of the service itself.
func (s *Server) issuerOrigin() string {
	scheme, rest, _ := strings.Cut(s.issuer, "://")
	host, _, _ := strings.Cut(rest, "/")
	return strings.ToLower(scheme + "://" + host)
}

// withCORS wraps a route's handlers in corsUnion and adds its preflight (OPTIONS).
func (s *Server) withCORS(methods map[string]http.HandlerFunc) map[string]http.HandlerFunc {
	return corsRoute(methods, s.corsUnion)
}

// withOpenCORS wraps a route's handlers in corsAny and adds its preflight.
func withOpenCORS(methods map[string]http.HandlerFunc) map[string]http.HandlerFunc {
	return corsRoute(methods, corsAny)
}

// withRegistrationCORS wraps the registration route's handlers in
// corsRegistration and adds its preflight.
func withRegistrationCORS(methods map[string]http.HandlerFunc) map[string]http.HandlerFunc {
	return corsRoute(methods, corsRegistration)
}

// corsRoute wraps a route's handlers in wrap and adds its preflight (OPTIONS).
func corsRoute(methods map[string]http.HandlerFunc, wrap func(string, http.HandlerFunc) http.HandlerFunc) map[string]http.HandlerFunc {
	names := make([]string, 0, len(methods)+1)
	for m := range methods {
		names = append(names, m)
	}
	names = append(names, http.MethodOptions)
	slices.Sort(names)
	allow := strings.Join(names, ", ")
	out := make(map[string]http.HandlerFunc, len(methods)+1)
	for m, h := range methods {
		out[m] = wrap(allow, h)
	}
	out[http.MethodOptions] = wrap(allow, nil)
	out[otherMethods] = wrap(allow, nil) // sets the headers only: the mux's 405 (server.go) answers then
	return out
}

// otherMethods is the key of a CORS route's handler map whose handler sets the
// route's CORS headers for a method the route does not serve, before the mux's
// 405 (fourth review: a page on another origin could not read why it was
// refused). It is no method: routes registers no pattern for it.
const otherMethods = ""

// requestClientID is the client id a token, revocation or introspection request
// names: its Basic user, else its form's client_id.
func requestClientID(r *http.Request, params url.Values) string {
	if id, _, ok := r.BasicAuth(); ok {
		if id, err := url.QueryUnescape(id); err == nil {
			return id
		}
		return ""
	}
	return params.Get("client_id")
}
