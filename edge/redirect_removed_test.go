package edge_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/palmgate/palmgate/core/oidc"
)

// TestRemovedRedirectURIPage checks what the browser of a login gets when the
// redirect_uri it started with is removed from its client before the palm scan is
// answered: the error page, never a redirect carrying the code (RFC 6749 4.1.2.1).
func TestRemovedRedirectURIPage(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const removed = "https://lapsed.example.net/callback"
	name := "Dyn App"
	ci, _, err := e.oidc.Clients().Create(ctx, oidc.ClientSpec{Name: &name, RedirectURIs: []string{testRedirect, removed}, Owner: "dev"})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	q := authorizeQuery()
	q.Set("client_id", ci.ID)
	q.Set("redirect_uri", removed)
	l := e.authorize(t, q)
	id, nonce := e.challenge(t, l)
	e.devScan(t, id, nonce, "alice")
	if _, err := e.oidc.Clients().Update(ctx, ci.ID, "dev", oidc.ClientSpec{RedirectURIs: []string{testRedirect}}); err != nil {
		t.Fatalf("Update: %v", err)
	}
	w := e.do(t, req{method: http.MethodGet, target: "/oauth2/verify?auth_request_id=" + l.id,
		header: http.Header{"Accept": {browserAccept}}, cookies: []*http.Cookie{l.cookie}})
	wantPage(t, w, http.StatusBadRequest, "This sign-in link is not valid")
	if loc := w.Header().Get("Location"); loc != "" {
		t.Fatalf("the browser was sent to %q", loc)
	}
}
