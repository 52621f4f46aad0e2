package oidc

import (
	"context"
	"testing"

	"github.com/palmgate/palmgate/core/bearer"
)

// TestScopesOfTheProtectedResource (fourth review): a palmgate_bearer { resource
// ... scope tools:call } site names tools:call in its 401 (`scope=`) and in its
// RFC 9728 document (`scopes_supported`), and a stock MCP client asks for exactly
// those scopes; but a client without a `resources` list (one that registered
// itself or is described by a metadata document, which has only the default
// scopes) got invalid_scope, so no such client could use such a server. It may
// ask for the scopes of the site that protects the resource it names, in a token
// for that resource only; refresh keeps them. Without that resource, for a
// listed resource with no site, or for a client with its own `resources` list,
// they are still invalid_scope.
func TestScopesOfTheProtectedResource(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	r := &bearer.Resources{}
	r.Add(bearer.NewResourceMetadata(mcpResource, oauthIssuer, []string{"tools:call"}))
	r.Allow("https://listed.example.test/api")
	h.svc.resources = r

	p := params("client_id", "other", "redirect_uri", otherRedir, "scope", "tools:call offline_access", "nonce", "", "prompt", "consent", "resource", mcpResource)
	resp := h.exchange(t, h.login(t, p, "alice"), "")
	if resp.Scope != "offline_access tools:call" {
		t.Errorf("scope %q, want offline_access tools:call", resp.Scope)
	}
	next := h.refresh(t, "other", resp.RefreshToken, "")
	if next.Scope != "offline_access tools:call" {
		t.Errorf("refreshed scope %q", next.Scope)
	}
	for _, tc := range []struct{ name, client, redirect, resource string }{
		{"no resource", "other", otherRedir, ""},
		{"a listed resource without a site", "other", otherRedir, "https://listed.example.test/api"},
		{"a client with its own resources", "app", appRedirect, apiResource},
	} {
		_, err := h.svc.Authorize(ctx, params("client_id", tc.client, "redirect_uri", tc.redirect, "scope", "openid tools:call", "resource", tc.resource), testBrowser)
		wantError(t, err, ErrInvalidScope)
	}
}

// TestConsentIsPerResource (fourth review): a person's remembered consent named
// scopes only, so within the SSO session a client that the person let reach one
// resource (the login page names it) got a token for another at once, and, since
// clients without resources may ask for a site's own scopes, the consent to one
// site's `admin` answered a request for another site's `admin`. A request for a
// resource the person has not consented to for the client asks again; one they
// have is still answered at once.
func TestConsentIsPerResource(t *testing.T) {
	h := newSSOHarness(t, ssoTTL)
	const other = "https://other-mcp.example.test/mcp"
	r := &bearer.Resources{}
	r.Add(bearer.NewResourceMetadata(mcpResource, oauthIssuer, []string{"admin"}))
	r.Add(bearer.NewResourceMetadata(other, oauthIssuer, []string{"admin"}))
	h.svc.resources = r
	ask := func(resource string) []string {
		return []string{"client_id", "other", "redirect_uri", otherRedir, "scope", "admin", "nonce", "", "resource", resource}
	}
	_, sess := h.scanLogin(t, ask(mcpResource), "alice", "")
	b := testBrowser
	b.Session = sess.ID
	wantCode(t)(h.svc.Authorize(context.Background(), params(ask(mcpResource)...), b))
	ar, err := h.svc.Authorize(context.Background(), params(ask(other)...), b)
	if err != nil || ar.Answer != nil || ar.Status != RequestConsent {
		t.Fatalf("in the session, the same scope for another resource = %+v, %v; want the consent page", ar, err)
	}
}
