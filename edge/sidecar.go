package edge

import (
	"context"
	"net/http"
	"strings"

	"github.com/palmgate/palmgate/core/oidc"
)

// handleCheck is the forward-auth endpoint for gateways that are not Caddy (nginx
// auth_request, Traefik forwardAuth, Caddy forward_auth): 200 with the identity
// headers for a valid token with the scopes of ?scope=, otherwise 401 or 403 as the
// bearer middleware answers. It accepts any method, as gateways forward the
// original request's.
func (s *Server) handleCheck(w http.ResponseWriter, r *http.Request) {
	var scopes []string
	if q := r.URL.Query()["scope"]; len(q) > 0 {
		scopes = strings.Fields(strings.Join(q, " "))
	}
	claims, err := CheckBearer(r, s.oidc.AccessVerifier(), "", scopes)
	if err == nil {
		err = checkAgents(r, claims)
	}
	if err != nil {
		writeChallenge(w, Realm, err, s.logger)
		return
	}
	SetIdentityHeaders(w.Header(), claims)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
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
