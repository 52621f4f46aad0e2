package oidc

import (
	"context"
	"slices"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/core/bearer"
)

// mcpResource is a resource a palmgate_bearer site protects (an MCP server).
const mcpResource = "https://mcp.example.test/mcp"

// withProtected gives h's service the resources of its bearer sites.
func (h *harness) withProtected(uris ...string) {
	r := &bearer.Resources{}
	for _, u := range uris {
		r.Add(bearer.NewResourceMetadata(u, oauthIssuer, nil))
	}
	h.svc.resources = r
}

// TestResourceWithoutOpenID: an MCP client asks a token for its server without
// openid: it gets an access token for that resource (aud) and, with
// offline_access, a refresh token, and no ID token; without a resource openid is
// still required (issue 23).
func TestResourceWithoutOpenID(t *testing.T) {
	h := newHarness(t)
	h.withProtected(mcpResource)
	ctx := context.Background()
	p := params("client_id", "other", "redirect_uri", otherRedir, "scope", "offline_access", "nonce", "", "prompt", "consent", "resource", mcpResource)
	resp := h.exchange(t, h.login(t, p, "alice"), "")
	if resp.IDToken != "" {
		t.Error("an ID token was issued without openid")
	}
	if resp.RefreshToken == "" {
		t.Error("no refresh token with offline_access")
	}
	if aud := h.accessAudience(t, resp.AccessToken); !slices.Equal(aud, jwt.ClaimStrings{mcpResource}) {
		t.Errorf("aud %v, want [%s]", aud, mcpResource)
	}
	next := h.refresh(t, "other", resp.RefreshToken, "")
	if next.IDToken != "" || !slices.Equal(h.accessAudience(t, next.AccessToken), jwt.ClaimStrings{mcpResource}) {
		t.Errorf("refreshed: id token %q, aud %v", next.IDToken, h.accessAudience(t, next.AccessToken))
	}
	_, err := h.svc.Authorize(ctx, params("client_id", "other", "redirect_uri", otherRedir, "scope", "offline_access"), testBrowser)
	wantError(t, err, ErrInvalidScope)
}

// TestProtectedResourcesForClientsWithoutList: a client with no `resources` list
// may ask for the resources palmgate's bearer sites protect (and the operator's
// list), and no other; a client with its own list keeps exactly it (issue 23).
func TestProtectedResourcesForClientsWithoutList(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.withProtected(mcpResource)
	h.svc.resources.Allow("https://listed.example.test/api")
	for _, tc := range []struct {
		name, client, redirect, resource, wantErr string
	}{
		{"protected site", "other", otherRedir, mcpResource, ""},
		{"operator's list", "other", otherRedir, "https://listed.example.test/api", ""},
		{"unknown resource", "other", otherRedir, "https://evil.example.test/mcp", ErrInvalidTarget},
		{"client with its own list", "app", appRedirect, mcpResource, ErrInvalidTarget},
		{"client's own resource", "app", appRedirect, apiResource, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.svc.Authorize(ctx, params("client_id", tc.client, "redirect_uri", tc.redirect, "resource", tc.resource), testBrowser)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Authorize: %v", err)
				}
				return
			}
			wantError(t, err, tc.wantErr)
		})
	}
	t.Run("no protected resources: invalid_target", func(t *testing.T) {
		h := newHarness(t)
		_, err := h.svc.Authorize(ctx, params("client_id", "other", "redirect_uri", otherRedir, "resource", mcpResource), testBrowser)
		wantError(t, err, ErrInvalidTarget)
	})
}
