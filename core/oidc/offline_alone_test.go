package oidc

import (
	"slices"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// TestOfflineAccessAloneWithoutRefreshGrant (fourth review, a later pass): a
// client registered without the refresh_token grant that asks for
// offline_access alone with a resource is not granted offline_access (it gets
// no refresh token): the token answers an empty scope, as for a request of the
// resource alone, not scope=offline_access without a refresh token.
func TestOfflineAccessAloneWithoutRefreshGrant(t *testing.T) {
	h := newHarness(t)
	h.withProtected(mcpResource)
	h.openRegistration(RegistrationConfig{})
	out := h.register(t, RegistrationRequest{RedirectURIs: []string{regLoopback}, TokenEndpointAuthMethod: "none"}, regAddress)
	p := regParams(out.ClientID, regLoopback)
	p.Set("scope", ScopeOfflineAccess)
	p.Set("resource", mcpResource)
	l := h.login(t, p, "alice")
	resp, err := h.token("grant_type", "authorization_code", "client_id", out.ClientID, "code", l.code,
		"redirect_uri", regLoopback, "code_verifier", spaVerifier)
	if err != nil {
		t.Fatal(err)
	}
	if resp.RefreshToken != "" || resp.Scope != "" {
		t.Fatalf("scope %q, refresh token %v; want an empty scope and none", resp.Scope, resp.RefreshToken != "")
	}
	if aud := h.accessAudience(t, resp.AccessToken); !slices.Equal(aud, jwt.ClaimStrings{mcpResource}) {
		t.Errorf("aud %v, want [%s]", aud, mcpResource)
	}
}
