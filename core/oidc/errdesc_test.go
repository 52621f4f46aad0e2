package oidc

import (
	"context"
	"errors"
	"testing"
)

// TestErrorDescriptionCharset checks RFC 6749 4.1.2.1: an error_description sent
// back to the client holds only %x20-21 / %x23-5B / %x5D-7E (printable ASCII
// without '"' and '\'). The descriptions quote what the request carried (%q):
// before the fix a refused scope came back as `scope "admin" is not allowed for this client`, and
// a non-ASCII response_mode came back as it was sent.
func TestErrorDescriptionCharset(t *testing.T) {
	h := newHarness(t)
	for name, p := range map[string][]string{
		"scope not allowed":     {"scope", "openid admin"},
		"scope not a token":     {"scope", `openid a\b`},
		"response_mode unknown": {"response_mode", "fragmént"},
		"prompt unknown":        {"prompt", `"x"`},
		"max_age":               {"max_age", "é"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := h.svc.Authorize(context.Background(), params(p...), testBrowser)
			var back *RedirectError
			if !errors.As(err, &back) {
				t.Fatalf("Authorize = %v, want an error sent back to the client", err)
			}
			desc := back.Redirect(testIssuer).Params().Get("error_description")
			if desc == "" {
				t.Fatal("no error_description")
			}
			for _, c := range []byte(desc) {
				if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
					t.Fatalf("error_description %q holds %q, outside RFC 6749's set", desc, c)
				}
			}
		})
	}
}
