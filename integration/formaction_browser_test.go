package integration

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/palmgate/palmgate/internal/tooltest"
)

// TestBrowserCancelThenRPRedirects (third review) clicks the login page's Cancel
// for a relying party whose callback, as oauth2-proxy's on a central auth host
// does, redirects on to another origin (the application). Chromium applies the
// page's CSP form-action to every redirect that follows the form's POST, so a
// form-action of 'self' and the redirect_uri's origin stops the browser at the
// callback's redirect: it never reaches the application. The consent page's
// Allow and the form_post page meet the same stop.
//
// Skipped: finding 4 of the third review (reviewer 2), a design decision for the
// lead (the pages' form-action against relying parties that redirect on); it
// fails on rev3-2 with the browser still on /oauth2/verify.
func TestBrowserCancelThenRPRedirects(t *testing.T) {
	t.Skip("finding 4 (third review, reviewer 2): form-action stops the RP callback's redirect to another origin")
	t.Parallel()
	tooltest.Chromium.Need(t) // before any server starts

	app := &callbackRecorder{hit: make(chan struct{}, 1)} // the application, on its own origin
	appSrv := httptest.NewServer(app)
	t.Cleanup(appSrv.Close)
	rp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, appSrv.URL+"/callback?from=rp&"+r.URL.RawQuery, http.StatusFound)
	}))
	t.Cleanup(rp.Close)
	c := oidcClient{id: "proxy-app", secret: "secret-" + randHex(16), name: "Proxied App", redirects: []string{rp.URL + "/oauth2/callback"}, scopes: testScopes}
	e := startOIDC(t, []oidcClient{c})
	step := newChromium(t)
	if err := chromedp.Do(step(20*time.Second), chromedp.Navigate(e.authURL(c, "state", "st-"+randHex(8)))); err != nil {
		t.Fatalf("navigating to the authorization URL: %v", err)
	}
	if err := chromedp.Do(step(10*time.Second), chromedp.WaitVisible(chromedp.CSS("#cancel"))); err != nil {
		t.Fatalf("the login page shows no Cancel: %v", err)
	}
	if err := chromedp.Do(step(10*time.Second), chromedp.Click(chromedp.CSS("#cancel"))); err != nil {
		t.Fatalf("clicking Cancel: %v", err)
	}
	select {
	case <-app.hit:
	case <-time.After(browserWait):
		l, _ := chromedp.Run(step(5*time.Second), chromedp.Location())
		t.Fatalf("the browser did not reach the application (%s) within %s after Cancel and the callback's redirect; it is at %q", appSrv.URL, browserWait, l)
	}
}
