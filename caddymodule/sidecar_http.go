package caddymodule

import (
	"net/http"
	"strings"
)

// handleCheck is the forward-auth endpoint for gateways that are not Caddy (nginx
// auth_request, Traefik forwardAuth, Caddy forward_auth): 200 with the identity
// headers for a valid token with the scopes of ?scope=, otherwise 401 or 403 as the
// bearer middleware answers. It accepts any method, as gateways forward the
// original request's.
func (a *App) handleCheck(w http.ResponseWriter, r *http.Request) {
	var scopes []string
	if q := r.URL.Query()["scope"]; len(q) > 0 {
		scopes = strings.Fields(strings.Join(q, " "))
	}
	claims, refusal := checkBearer(r, a.oidc.AccessVerifier(), scopes, realm)
	if refusal != nil {
		refusal.write(w, a.logger)
		return
	}
	setIdentityHeaders(w.Header(), claims)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}

// handleIntrospect is token introspection (RFC 7662), for authenticated clients.
func (a *App) handleIntrospect(w http.ResponseWriter, r *http.Request) {
	clientID, params, ok := a.clientRequest(w, r)
	if !ok {
		return
	}
	answer, err := a.oidc.Introspect(r.Context(), clientID, params.Get("token"))
	if err != nil {
		a.writeOAuthError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, answer)
}

// handleRevoke is token revocation (RFC 7009), for authenticated clients: 200 also
// for unknown tokens.
func (a *App) handleRevoke(w http.ResponseWriter, r *http.Request) {
	clientID, params, ok := a.clientRequest(w, r)
	if !ok {
		return
	}
	if err := a.oidc.Revoke(r.Context(), clientID, params.Get("token")); err != nil {
		a.writeOAuthError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}
