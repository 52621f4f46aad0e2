package edge_test

import (
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

var cspNonceRE = regexp.MustCompile(`'nonce-([A-Za-z0-9+/]+)'`)

// wantCSP checks that w's Content-Security-Policy is exactly want, in which
// {nonce} stands for the answer's own nonce.
func wantCSP(t *testing.T, w *httptest.ResponseRecorder, want string) {
	t.Helper()
	csp := w.Header().Get("Content-Security-Policy")
	if m := cspNonceRE.FindStringSubmatch(csp); m != nil {
		want = strings.ReplaceAll(want, "{nonce}", m[1])
	}
	if csp != want {
		t.Errorf("Content-Security-Policy\n %q, want\n %q", csp, want)
	}
}
