package integration

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
)

// browserAccept is what a browser's navigation sends.
const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

// expectErrorPage checks that resp is the styled error page with status and the
// plain-words text, and holds no JSON.
func expectErrorPage(t *testing.T, resp *testserver.Response, status int, text string) {
	t.Helper()
	body := string(resp.Body)
	if resp.Status != status || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("%s: %d %s, want %d and a page\n%s", resp.Request, resp.Status, resp.Header.Get("Content-Type"), status, testserver.Snippet(resp.Body))
	}
	if !strings.Contains(body, text) || !strings.Contains(body, `id="tech"`) || strings.Contains(body, `"error":`) {
		t.Errorf("%s: want the error page saying %q, no JSON:\n%s", resp.Request, text, testserver.Snippet(resp.Body))
	}
	if resp.Header.Get("Cache-Control") != "no-store" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Errorf("%s: headers %v, want no-store and the pages' CSP", resp.Request, resp.Header)
	}
}

// TestErrorPagesThroughCaddy: through the real binary, a browser sent to
// authorize with an unknown client or an unregistered redirect_uri gets the error
// page (an API caller the OAuth JSON); unknown paths under palmgate's prefixes
// answer its 404 (never the empty 200 of a site with nothing else); and a scan
// URL opened in a phone's browser shows the page about the palm app, with the
// operator's palm_app_url, while the app still gets the JSON.
func TestErrorPagesThroughCaddy(t *testing.T) {
	t.Parallel()
	c := newOIDCClient("shop", "")
	e := startOIDC(t, []oidcClient{c}, "palm_app_url https://apps.example.com/palm")

	for _, tc := range []struct{ name, url, text string }{
		{"unknown client", e.authURL(c, "client_id", "nobody"), "This application is not known here"},
		{"unregistered redirect_uri", e.authURL(c, "redirect_uri", "https://evil.example/callback"), "This sign-in link is not valid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectErrorPage(t, e.do(t, "GET", tc.url, nil, "Accept", browserAccept), http.StatusBadRequest, tc.text)
			expectOAuthError(t, e.do(t, "GET", tc.url, nil, "Accept", "application/json"), http.StatusBadRequest, "invalid_request")
			expectOAuthError(t, e.do(t, "GET", tc.url, nil), http.StatusBadRequest, "invalid_request")
		})
	}

	t.Run("unknown paths", func(t *testing.T) {
		// The portal's own 404 is its page to browsers, and JSON to API callers
		// (review of issues 20–24, finding 4).
		if r := e.do(t, "GET", "/portal/nope", nil, "Accept", browserAccept).ExpectStatus(t, http.StatusNotFound); !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
			t.Errorf("%s from a browser: Content-Type %q, want the portal's page", r.Request, r.Header.Get("Content-Type"))
		}
		for _, accept := range []string{"", "application/json"} {
			resp := e.do(t, "GET", "/portal/nope", nil, "Accept", accept)
			if m := resp.ExpectStatus(t, http.StatusNotFound).Object(t); str(m["code"]) != "not_found" || str(m["error"]) == "" {
				t.Errorf("%s (Accept %q): %s, want a JSON 404", resp.Request, accept, resp.Body)
			}
		}
		for _, path := range []string{"/oauth2/nope", "/v1", "/v1/nope", "/health", "/health/nope"} {
			expectErrorPage(t, e.do(t, "GET", path, nil, "Accept", browserAccept), http.StatusNotFound, "not found")
			resp := e.do(t, "GET", path, nil)
			if m := resp.ExpectStatus(t, http.StatusNotFound).Object(t); str(m["error"]) == "" && str(m["code"]) == "" {
				t.Errorf("%s: %s, want a JSON 404", resp.Request, resp.Body)
			}
		}
	})

	t.Run("a phone without the palm app", func(t *testing.T) {
		s := e.initSession(t, newAgent(t, "phone-"+randHex(4)).registration(time.Now()))
		scan := e.appLink(t, s.URL)
		resp := e.do(t, "GET", scan, nil, "Accept", browserAccept, "User-Agent", testserver.PhoneUserAgent).ExpectStatus(t, http.StatusOK)
		body := string(resp.Body)
		if !strings.Contains(body, "Open this in your palm app") || !strings.Contains(body, `href="https://apps.example.com/palm"`) || strings.Contains(body, `"challengeId"`) {
			t.Errorf("%s: want the palm app page linking palm_app_url:\n%s", resp.Request, testserver.Snippet(resp.Body))
		}
		// The app (and `caddy palmgate scan`) asks for JSON, or sends no Accept.
		for _, accept := range []string{"application/json", ""} {
			var headers []string
			if accept != "" {
				headers = []string{"Accept", accept}
			}
			if m := e.do(t, "GET", scan, nil, headers...).ExpectStatus(t, http.StatusOK).Object(t); str(m["status"]) != "pending" {
				t.Errorf("the app's JSON (Accept %q): %v", accept, m)
			}
		}
	})
}
