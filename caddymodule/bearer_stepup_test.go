package caddymodule

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// TestBearerInsufficientScopeNamesTheMetadata (fourth review): MCP's scope
// challenge (2025-11-25, "Scope Challenge Handling") answers a token that lacks a
// scope with 403 `error="insufficient_scope"`, the scopes and the
// `resource_metadata` the client re-authorizes with; only the 401 named the
// document, so a client that meets the 403 first (a token from another flow) had
// no metadata to step up with.
func TestBearerInsufficientScopeNamesTheMetadata(t *testing.T) {
	mw, token := newTestBearer(t, "mcp:tools") // the token holds openid only
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "https://mcp.example.test/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), w, &caddyhttp.Server{})
	err := mw.ServeHTTP(w, r, caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return errors.New("reached") }))
	var he caddyhttp.HandlerError
	if !errors.As(err, &he) || he.StatusCode != http.StatusForbidden {
		t.Fatalf("%v, want a 403", err)
	}
	ch := w.Header().Get("WWW-Authenticate")
	for _, part := range []string{`error="insufficient_scope"`, `scope="mcp:tools"`,
		`resource_metadata="https://mcp.example.test/.well-known/oauth-protected-resource"`} {
		if !strings.Contains(ch, part) {
			t.Errorf("challenge %q lacks %s", ch, part)
		}
	}
	if n := strings.Count(ch, "scope="); n != 1 {
		t.Errorf("challenge %q names scope %d times", ch, n)
	}
}
