package integration

import (
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/palmgate/palmgate/internal/tooltest"
)

// TestBrowserLoginCancel (issue 22) drives the login page in headless Chromium:
// its script, admitted by the CSP nonce, rewrites the expiry in the browser's
// own time (the "(UTC)" fallback is gone), and a click on Cancel takes the
// browser to the application's callback with error=access_denied, the state and
// iss.
func TestBrowserLoginCancel(t *testing.T) {
	t.Parallel()
	tooltest.Chromium.Need(t) // before any server starts

	cb := &callbackRecorder{hit: make(chan struct{}, 1)}
	rp := httptest.NewServer(cb)
	t.Cleanup(rp.Close)
	c := oidcClient{id: "cancel-shop", secret: "secret-" + randHex(16), name: "Palm Shop", redirects: []string{rp.URL + "/callback"}, scopes: testScopes}
	e := startOIDC(t, []oidcClient{c})
	step := newChromium(t)
	state := "st-" + randHex(8)
	if _, err := chromedp.Run(step(20*time.Second), chromedp.NavigateResponse(e.authURL(c, "state", state))); err != nil {
		t.Fatalf("navigating to the authorization URL: %v", err)
	}
	if err := chromedp.Do(step(10*time.Second), chromedp.WaitVisible(chromedp.CSS("#cancel"))); err != nil {
		t.Fatalf("the login page shows no Cancel: %v", err)
	}
	expiry, err := chromedp.Run(step(5*time.Second), chromedp.Text(chromedp.CSS("time.local")))
	if err != nil {
		t.Fatalf("reading the login page's expiry: %v", err)
	}
	datetime, err := chromedp.Run(step(5*time.Second), chromedp.Evaluate[string](`document.querySelector("time.local").getAttribute("datetime")`))
	if err != nil || !timeRE.MatchString(datetime) || expiry == "" || strings.Contains(expiry, "UTC") {
		t.Errorf("login page expiry %q (datetime %q, %v): want the browser's local time, the script having run", expiry, datetime, err)
	}
	if err := chromedp.Do(step(10*time.Second), chromedp.Click(chromedp.CSS("#cancel"))); err != nil {
		t.Fatalf("clicking Cancel: %v", err)
	}
	select {
	case <-cb.hit:
	case <-time.After(browserWait):
		l, _ := chromedp.Run(step(5*time.Second), chromedp.Location())
		t.Fatalf("the browser did not reach the callback within %s after Cancel; it is at %q", browserWait, l)
	}
	got := cb.queries()
	if len(got) != 1 {
		t.Fatalf("callback queries %q, want one", got)
	}
	q, _ := url.ParseQuery(got[0])
	if q.Get("error") != "access_denied" || q.Get("state") != state || q.Get("iss") != e.URL+"/oauth2" || q.Get("code") != "" {
		t.Errorf("callback after Cancel %q, want error=access_denied, state=%s, iss=%s/oauth2 and no code", got[0], state, e.URL)
	}
}
