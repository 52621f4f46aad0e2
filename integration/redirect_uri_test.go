package integration

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/internal/testserver"
)

// TestRedirectURIsStrict: one strict check of redirect URIs, through the real
// binary (issue 18, finding 6). A Caddyfile client with a loose redirect_uri or
// post_logout_redirect_uri fails to load, naming the client and the option; the
// admin API (CLI) and the portal refuse the same URIs for dynamic clients with a
// clear 4xx.
func TestRedirectURIsStrict(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, line, want string }{
		{"wildcard host", "redirect_uri https://*.evil.example/cb", "client loose: redirect_uri"},
		{"port out of range", "redirect_uri https://evil.example:99999/cb", "client loose: redirect_uri"},
		{"space", `redirect_uri "https://evil.example/a b"`, "client loose: redirect_uri"},
		{"post-logout wildcard", "redirect_uri https://a.example/cb\npost_logout_redirect_uri https://*.evil.example/out", "client loose: post_logout_redirect_uri"},
	} {
		t.Run("static "+tc.name, func(t *testing.T) {
			t.Parallel()
			out := testserver.StartExpectFailure(t, testserver.Options{Global: "client loose {\nsecret s\n" + tc.line + "\n}"})
			if !strings.Contains(out, tc.want) {
				t.Errorf("a Caddyfile with %q: want a refusal naming %q, got:\n%s", tc.line, tc.want, testserver.Snippet([]byte(out)))
			}
		})
	}

	e := startOIDC(t, nil)
	dev := e.portalSignIn(t, e.subject("strict-dev"))
	for _, uri := range []string{"https://evil.example/a b", "https://evil.example:99999/cb", "https://*.evil.example/cb"} {
		if out, err := e.cliErr(t, "add", "--name", "Loose", "--redirect-uri", uri); err == nil || !strings.HasPrefix(out, "caddy palmgate client add: --redirect-uri ") || strings.Count(out, "\n") != 1 {
			t.Errorf("client add --redirect-uri %q: %v, want one line naming --redirect-uri:\n%s", uri, err, out)
		}
		r := dev.post(t, "/portal/apps", url.Values{"csrf": {dev.csrf(t)}, "name": {"Loose"}, "redirect_uris": {uri}})
		if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), `id="form-error"`) || !strings.Contains(string(r.Body), html.EscapeString(uri)+"</textarea>") {
			t.Errorf("portal: creating an application with %q: %d, want 400 with the form as typed and an error message", uri, r.Status)
		}
	}
	if strings.Contains(e.cli(t, "list"), "Loose") || strings.Contains(string(dev.get(t, "/portal").Body), "Loose") {
		t.Error("a refused redirect URI created a client")
	}
}
