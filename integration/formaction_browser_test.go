package integration

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/palmgate/palmgate/internal/tooltest"
)

// TestBrowserCancelThenRPRedirects (third review, finding 4) drives, in headless
// Chromium, the three answers whose form submission leads into a relying party's
// redirects, for relying parties whose callback, as oauth2-proxy's on a central
// auth host does, redirects on to another origin (the application): the login
// page's Cancel, a form_post login (its auto-submitted form), and the SSO consent
// page's Allow. Chromium applies a page's CSP form-action to every redirect that
// follows the form's POST; with form-action 'self' and the redirect_uri's origin
// the browser stopped at the callback's redirect and never reached the
// application. These answers now have no form-action.
func TestBrowserCancelThenRPRedirects(t *testing.T) {
	t.Parallel()
	tooltest.Chromium.Need(t) // before any server starts

	app := &callbackRecorder{hit: make(chan struct{}, 1)} // the application, on its own origin
	appSrv := httptest.NewServer(app)
	t.Cleanup(appSrv.Close)
	rp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm() // the query, or form_post's body
		q := url.Values{"from": {"rp"}, "code": {r.Form.Get("code")}, "error": {r.Form.Get("error")}}
		http.Redirect(w, r, appSrv.URL+"/callback?"+q.Encode(), http.StatusFound)
	}))
	t.Cleanup(rp.Close)
	c := oidcClient{id: "proxy-app", secret: "secret-" + randHex(16), name: "Proxied App", redirects: []string{rp.URL + "/oauth2/callback"}, scopes: testScopes}
	d := oidcClient{id: "proxy-news", secret: "secret-" + randHex(16), name: "Proxied News", redirects: []string{rp.URL + "/news/callback"}, scopes: testScopes}
	e := startOIDC(t, []oidcClient{c, d}, "sso_session 1h")
	step := newChromium(t)
	// reached waits for the application's request and for the browser to have
	// loaded its page (a navigation started while it loads would be aborted), and
	// returns the query the relying party passed on.
	reached := func(what string) url.Values {
		t.Helper()
		select {
		case <-app.hit:
		case <-time.After(browserWait):
			l, _ := chromedp.Run(step(5*time.Second), chromedp.Location())
			t.Fatalf("%s: the browser did not reach the application (%s) within %s after the callback's redirect; it is at %q", what, appSrv.URL, browserWait, l)
		}
		loaded := `document.readyState === "complete" && location.href.startsWith(` + strconv.Quote(appSrv.URL+"/callback") + `)`
		deadline := time.Now().Add(browserWait)
		for {
			done, err := chromedp.Run(step(5*time.Second), chromedp.Evaluate[bool](loaded))
			if err == nil && done {
				break
			}
			if time.Now().After(deadline) {
				l, _ := chromedp.Run(step(5*time.Second), chromedp.Location())
				t.Fatalf("%s: the application's page did not finish loading (%v); the browser is at %q", what, err, l)
			}
			time.Sleep(50 * time.Millisecond)
		}
		got := app.queries()
		q, _ := url.ParseQuery(got[len(got)-1])
		return q
	}
	click := func(what, css string) {
		t.Helper()
		if err := chromedp.Do(step(10*time.Second), chromedp.WaitVisible(chromedp.CSS(css)), chromedp.Click(chromedp.CSS(css))); err != nil {
			t.Fatalf("%s: clicking %s: %v", what, css, err)
		}
	}
	navigate := func(what, u string) {
		t.Helper()
		if _, err := chromedp.Run(step(20*time.Second), chromedp.NavigateResponse(u)); err != nil {
			t.Fatalf("%s: navigating to the authorization URL: %v", what, err)
		}
	}

	// 1. The login page's Cancel (query mode).
	navigate("Cancel", e.authURL(c, "state", "st-"+randHex(8)))
	click("Cancel", "#cancel")
	if q := reached("Cancel"); q.Get("error") != "access_denied" {
		t.Errorf("Cancel: the application got %v, want error=access_denied", q)
	}

	// 2. A form_post login: the page's simulated scan, then the auto-submitted form.
	navigate("form_post", e.authURL(c, "response_mode", "form_post", "state", "st-"+randHex(8)))
	click("form_post", "#simulate-button")
	if q := reached("form_post"); q.Get("code") == "" {
		t.Errorf("form_post: the application got %v, want a code", q)
	}

	// 3. The SSO consent page's Allow, for the second application.
	navigate("consent", e.authURL(d, "state", "st-"+randHex(8)))
	if l, _ := chromedp.Run(step(5*time.Second), chromedp.Location()); !strings.HasPrefix(l, e.URL+"/oauth2/consent?") {
		t.Fatalf("consent: the browser is at %q, want the consent page", l)
	}
	click("consent", "#allow")
	if q := reached("consent"); q.Get("code") == "" {
		t.Errorf("consent: the application got %v, want a code", q)
	}
}
