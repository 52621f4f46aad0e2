package edge

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/oidc"
)

// handleCheck is the forward-auth endpoint for gateways that are not Caddy (nginx
// auth_request, Traefik forwardAuth, Caddy forward_auth): 200 with the identity
// headers for a valid token with the scopes of ?scope= (and, with ?audience=, that
// URI in its aud), otherwise 401 or 403 as the bearer middleware answers. It accepts any method, as gateways forward the
// original request's.
func (s *Server) handleCheck(w http.ResponseWriter, r *http.Request) {
	params := checkParams(r)
	var scopes []string
	if q := params["scope"]; len(q) > 0 {
		scopes = strings.Fields(strings.Join(q, " "))
	}
	audience, err := checkAudience(params)
	var claims *bearer.Claims
	if err == nil {
		claims, err = CheckBearer(r, s.oidc.AccessVerifier(), audience, scopes)
	}
	if err == nil {
		err = checkAgents(params, claims)
	}
	if err != nil {
		writeChallenge(w, Realm, err, s.logger)
		return
	}
	SetIdentityHeaders(w.Header(), claims)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}

// checkAudience reads the check's ?audience=: the URI a token's aud must hold
// (the resource server's own, as palmgate_bearer's `audience`); "" for none.
func checkAudience(params url.Values) (string, error) {
	switch q := params["audience"]; len(q) {
	case 0:
		return "", nil
	case 1:
		return q[0], nil
	}
	return "", &fault.Error{Class: fault.Invalid, Code: bearer.CodeInvalidRequest, Message: "audience is given more than once"}
}

// checkParams are the check's parameters, the gateway operator's: those of the
// query up to a `path` parameter. Envoy's ext_authz appends the client's own path
// and query to its path_prefix, which docs/GATEWAYS.md ends with `&path=`, so
// what follows is the client's and is not read (a client's `&agents=allow` there
// would admit agents where the operator refuses them). Under /oauth2/check/, a
// path the gateway appended the client's path to, the query is the client's
// alone: none is read.
func checkParams(r *http.Request) url.Values {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/oauth2/check/"); ok && rest != "" {
		return url.Values{}
	}
	raw := r.URL.RawQuery
	for i := 0; i < len(raw); {
		end := strings.IndexByte(raw[i:], '&')
		if end < 0 {
			end = len(raw)
		} else {
			end += i
		}
		if name, _, _ := strings.Cut(raw[i:end], "="); name == "path" {
			raw = raw[:i]
			break
		}
		i = end + 1
	}
	params, _ := url.ParseQuery(raw) // as r.URL.Query(): a malformed pair is skipped
	return params
}

// authenticatedRequest reads a client-authenticated form POST and authenticates
// its client, answering the error itself (a failure counts against the client
// address's rate limit).
func (s *Server) authenticatedRequest(w http.ResponseWriter, r *http.Request,
	authenticate func(context.Context, oidc.ClientRequest) (string, error)) (string, oidc.ClientRequest, bool) {
	req, ok := s.clientRequest(w, r)
	if !ok {
		return "", req, false
	}
	clientID, err := authenticate(r.Context(), req)
	if err != nil {
		s.limiter.charge(r)
		s.writeOAuthError(w, r, err)
		return "", req, false
	}
	return clientID, req, true
}

// handleIntrospect is token introspection (RFC 7662), for authenticated clients.
func (s *Server) handleIntrospect(w http.ResponseWriter, r *http.Request) {
	clientID, req, ok := s.authenticatedRequest(w, r, s.oidc.Authenticate)
	if !ok {
		return
	}
	answer, err := s.oidc.Introspect(r.Context(), clientID, req.Params.Get("token"))
	if err != nil {
		s.writeOAuthError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, answer)
}

// handleRevoke is token revocation (RFC 7009), for authenticated clients: 200 also
// for unknown tokens.
func (s *Server) handleRevoke(w http.ResponseWriter, r *http.Request) {
	clientID, req, ok := s.authenticatedRequest(w, r, s.oidc.AuthenticateRevoker)
	if !ok {
		return
	}
	if err := s.oidc.Revoke(r.Context(), clientID, req.Params.Get("token")); err != nil {
		s.writeOAuthError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}
