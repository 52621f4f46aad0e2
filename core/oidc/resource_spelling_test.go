package oidc

import (
	"context"
	"slices"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// TestResourceSpelledByTheSDK (fourth review): MCP TypeScript SDK releases before
// the fix of its issue 1968 (2026) send the protected resource metadata's
// `resource` as `new URL(resource).href`, which
// adds the root path to an origin (https://mcp.example.test becomes
// https://mcp.example.test/), lower-cases the host and drops a default port. A
// palmgate_bearer { resource https://mcp.example.test } site was then unreachable
// for that SDK: its authorization request was invalid_target. Equivalent
// spellings (RFC 3986 6.2.2, 6.2.3) name the resource now, and the token's aud is
// the configured spelling, which the bearer site compares byte for byte; another
// path is still another resource.
func TestResourceSpelledByTheSDK(t *testing.T) {
	const root = "https://mcp.example.test"
	ctx := context.Background()
	h := newHarness(t)
	h.withProtected(root, mcpResource)
	for _, tc := range []struct{ asked, want string }{
		{root + "/", root},
		{"HTTPS://MCP.Example.Test:443", root},
		{"https://mcp.example.test:443/mcp", mcpResource},
		{mcpResource, mcpResource},
	} {
		p := params("client_id", "other", "redirect_uri", otherRedir, "scope", "offline_access", "nonce", "", "prompt", "consent", "resource", tc.asked)
		l := h.login(t, p, "alice")
		resp, err := h.svc.ExchangeCode(ctx, "other", l.code, otherRedir, "", tc.asked)
		if err != nil {
			t.Fatalf("%s: ExchangeCode with the resource repeated: %v", tc.asked, err)
		}
		if aud := h.accessAudience(t, resp.AccessToken); !slices.Equal(aud, jwt.ClaimStrings{tc.want}) {
			t.Errorf("%s: aud %v, want [%s]", tc.asked, aud, tc.want)
		}
		next, err := h.svc.Refresh(ctx, "other", resp.RefreshToken, "", tc.asked)
		if err != nil {
			t.Fatalf("%s: Refresh with the resource repeated: %v", tc.asked, err)
		}
		if aud := h.accessAudience(t, next.AccessToken); !slices.Equal(aud, jwt.ClaimStrings{tc.want}) {
			t.Errorf("%s: refreshed aud %v, want [%s]", tc.asked, aud, tc.want)
		}
		if _, err := h.svc.Refresh(ctx, "other", next.RefreshToken, "", "https://other.example.test/"); err == nil {
			t.Errorf("%s: a refresh for another resource was answered", tc.asked)
		}
	}
	for _, other := range []string{mcpResource + "/", root + "/mcp/x", "http://mcp.example.test/", "https://mcp.example.test:8443/", root + "/?q"} {
		_, err := h.svc.Authorize(ctx, params("client_id", "other", "redirect_uri", otherRedir, "resource", other), testBrowser)
		wantError(t, err, ErrInvalidTarget)
	}
}
