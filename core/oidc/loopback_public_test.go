package oidc

import (
	"context"
	"testing"
)

// TestLoopbackAnyPortForPublicClients (fourth review): RFC 8252 7.3 says the
// authorization server MUST accept any port for a loopback IP redirect URI, since
// a native app gets its port from the system when it starts; the README tells
// native apps to use `http://127.0.0.1:<port>/callback` with a `public` client.
// Only self-registered and metadata document clients had it: a public client of
// the operator (Caddyfile) or of the portal or admin API could not be used by a
// native app at all (a 400 page for every port but the registered one). Public
// clients now match such a URI with any port, path and query unchanged, and the
// code is exchanged with the URI the request used; a confidential client keeps
// the exact match (TestLoopbackAnyPort).
func TestLoopbackAnyPortForPublicClients(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.svc = h.reloaded(t, Client{ID: "app", Public: true, Name: "Native", RedirectURIs: []string{"http://127.0.0.1:8400/callback"}})
	ci, _, err := h.svc.Clients().Create(ctx, ClientSpec{Name: ptr("Native Dyn"), RedirectURIs: []string{"http://[::1]/cb"}, Owner: "dev", Public: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ client, uri string }{
		{"app", "http://127.0.0.1:50123/callback"},
		{"app", "http://127.0.0.1/callback"},
		{ci.ID, "http://[::1]:61000/cb"},
	} {
		p := params("client_id", tc.client, "redirect_uri", tc.uri, "code_challenge", spaChallenge(), "code_challenge_method", "S256")
		l := h.login(t, p, "alice")
		if _, err := h.token("grant_type", "authorization_code", "client_id", tc.client, "code", l.code,
			"redirect_uri", tc.uri, "code_verifier", spaVerifier); err != nil {
			t.Errorf("%s %s: exchange: %v", tc.client, tc.uri, err)
		}
	}
	for _, uri := range []string{"http://127.0.0.1:50123/other", "http://localhost:50123/callback", "https://127.0.0.1:50123/callback"} {
		p := params("redirect_uri", uri, "code_challenge", spaChallenge(), "code_challenge_method", "S256")
		_, err := h.svc.Authorize(ctx, p, testBrowser)
		wantError(t, err, ErrInvalidRequest)
	}
}
