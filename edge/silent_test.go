package edge_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// Silent renewal (issue 21, item 6): an application renews in a hidden iframe
// with prompt=none, so every answer to prompt=none must be loadable in a frame
// of the application's own page, while palmgate's pages stay unframeable.

// wantFrameableBy checks that the answer w may be framed by origin and by no one
// else: no X-Frame-Options (which cannot name an origin), and a CSP whose
// frame-ancestors, if any, is exactly origin.
func wantFrameableBy(t *testing.T, what string, w *httpRecorder, origin string) {
	t.Helper()
	if xfo := w.Header().Get("X-Frame-Options"); xfo != "" {
		t.Errorf("%s: X-Frame-Options %q: a hidden iframe of %s could not load it", what, xfo, origin)
	}
	csp := w.Header().Get("Content-Security-Policy")
	if i := strings.Index(csp, "frame-ancestors"); i >= 0 {
		directive, _, _ := strings.Cut(csp[i:], ";")
		if directive != "frame-ancestors "+origin {
			t.Errorf("%s: CSP %q, want frame-ancestors %s only", what, csp, origin)
		}
	}
}

// wantUnframeable checks that a page of palmgate may be framed by no one.
func wantUnframeable(t *testing.T, what string, w *httpRecorder) {
	t.Helper()
	if xfo := w.Header().Get("X-Frame-Options"); xfo != "DENY" {
		t.Errorf("%s: X-Frame-Options %q, want DENY", what, xfo)
	}
	if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("%s: CSP %q, want frame-ancestors 'none'", what, csp)
	}
}

// TestPromptNoneAnswersLoadInTheClientsFrame: prompt=none's answers, a code or
// login_required, by redirect (response_mode query) or by the auto-submitting
// form (form_post), load in a frame of the client's redirect_uri origin; the
// form_post page was sent with X-Frame-Options DENY and frame-ancestors 'none',
// which left a hidden iframe hanging until the library's timeout. The login page
// itself stays unframeable.
func TestPromptNoneAnswersLoadInTheClientsFrame(t *testing.T) {
	e := newEnv(t, withSSO(time.Hour))
	first := e.authorize(t, authorizeQuery())
	wantUnframeable(t, "the login page", e.do(t, req{method: http.MethodGet, target: "/oauth2/verify?auth_request_id=" + first.id, cookies: []*http.Cookie{first.cookie}}))
	id, nonce := e.challenge(t, first)
	e.devScan(t, id, nonce, "alice")
	w := e.do(t, req{method: http.MethodGet, target: "/oauth2/verify?auth_request_id=" + first.id, cookies: []*http.Cookie{first.cookie}})
	wantStatus(t, w, http.StatusFound)
	sess := cookieNamed(w, "__Host-palmgate_session")
	if sess == nil {
		t.Fatalf("the finished login set no session cookie: %v", w.Header()["Set-Cookie"])
	}
	const origin = "https://app.example.com" // testRedirect's

	for _, mode := range []string{"query", "form_post"} {
		q := authorizeQuery()
		q.Set("prompt", "none")
		q.Set("response_mode", mode)
		answer := func(what string, w *httpRecorder) url.Values {
			t.Helper()
			if mode == "query" {
				wantStatus(t, w, http.StatusFound)
				loc, err := url.Parse(w.Header().Get("Location"))
				if err != nil || !strings.HasPrefix(loc.String(), testRedirect+"?") {
					t.Fatalf("%s: Location %q, want the redirect_uri", what, w.Header().Get("Location"))
				}
				wantFrameableBy(t, what, w, origin)
				return loc.Query()
			}
			wantStatus(t, w, http.StatusOK)
			page := w.Body.String()
			if !strings.Contains(page, `action="`+testRedirect+`"`) {
				t.Fatalf("%s: the form_post page does not post to the redirect_uri:\n%s", what, page)
			}
			wantFrameableBy(t, what, w, origin)
			got := url.Values{}
			for _, name := range []string{"code", "error", "state"} {
				if _, rest, ok := strings.Cut(page, `name="`+name+`" value="`); ok {
					v, _, _ := strings.Cut(rest, `"`)
					got.Set(name, v)
				}
			}
			return got
		}

		in := answer("prompt=none "+mode+" within the session", e.do(t, req{method: http.MethodGet, target: "/oauth2/authorize?" + q.Encode(), cookies: []*http.Cookie{sess}}))
		if in.Get("code") == "" || in.Get("state") != "st-123" {
			t.Errorf("prompt=none %s within the session answered %v, want a code and the state", mode, in)
		}
		out := answer("prompt=none "+mode+" without a session", e.get(t, "/oauth2/authorize?"+q.Encode()))
		if out.Get("error") != "login_required" || out.Get("code") != "" {
			t.Errorf("prompt=none %s without a session answered %v, want login_required", mode, out)
		}
	}
}
