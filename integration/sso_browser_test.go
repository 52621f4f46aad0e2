package integration

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/palmgate/palmgate/internal/tooltest"
)

// TestBrowserSSOConsent drives the single sign-on session in headless Chromium: a
// login at one application with the page's simulated palm scan, then a second
// application in the same browser reaches its callback through the consent page
// (one click on Allow, no scan), and with prompt=none straight away.
func TestBrowserSSOConsent(t *testing.T) {
	t.Parallel()
	tooltest.Chromium.Need(t) // before any server starts

	cbA, cbB := &callbackRecorder{hit: make(chan struct{}, 1)}, &callbackRecorder{hit: make(chan struct{}, 1)}
	rpA, rpB := httptest.NewServer(cbA), httptest.NewServer(cbB)
	t.Cleanup(rpA.Close)
	t.Cleanup(rpB.Close)
	a := oidcClient{id: "sso-shop", secret: "secret-" + randHex(16), name: "Palm Shop", redirects: []string{rpA.URL + "/callback"}, scopes: testScopes}
	b := oidcClient{id: "sso-news", secret: "secret-" + randHex(16), name: "Palm News", redirects: []string{rpB.URL + "/callback"}, scopes: testScopes}
	e := startOIDC(t, []oidcClient{a, b}, "sso_session 1h")
	step := newChromium(t)
	// reached waits for the callback's request, then for the browser to have loaded
	// its page: a navigation started while the callback page still loads is
	// aborted by it (net::ERR_ABORTED) on a slow machine.
	reached := func(cb *callbackRecorder, rp, what string) {
		t.Helper()
		select {
		case <-cb.hit:
		case <-time.After(browserWait):
			l, _ := chromedp.Run(step(5*time.Second), chromedp.Location())
			t.Fatalf("%s: the browser did not reach the callback within %s; it is at %q", what, browserWait, l)
		}
		loaded := `document.readyState === "complete" && location.href.startsWith(` + strconv.Quote(rp+"/callback") + `)`
		deadline := time.Now().Add(browserWait)
		for {
			// Evaluated anew each time: a page that is still loading has no context yet.
			done, err := chromedp.Run(step(5*time.Second), chromedp.Evaluate[bool](loaded))
			if err == nil && done {
				return
			}
			if time.Now().After(deadline) {
				l, _ := chromedp.Run(step(5*time.Second), chromedp.Location())
				t.Fatalf("%s: the callback page did not finish loading (%v); the browser is at %q", what, err, l)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// 1. The first application: the login page, its simulated scan, the callback.
	if _, err := chromedp.Run(step(20*time.Second), chromedp.NavigateResponse(e.authURL(a))); err != nil {
		t.Fatalf("navigating to the first application's authorization URL: %v", err)
	}
	if err := chromedp.Do(step(10*time.Second), chromedp.Click(chromedp.CSS("#simulate-button"))); err != nil {
		t.Fatalf("clicking Simulate palm scan: %v", err)
	}
	reached(cbA, rpA.URL, "first login")

	// 2. The second application: the consent page, not the login page.
	resp, err := chromedp.Run(step(20*time.Second), chromedp.NavigateResponse(e.authURL(b)))
	if err != nil || resp.Status != http.StatusOK {
		t.Fatalf("second application: %v, %v; want the consent page", resp, err)
	}
	loc, _ := chromedp.Run(step(5*time.Second), chromedp.Location())
	if !strings.HasPrefix(loc, e.URL+"/oauth2/consent?auth_request_id=") {
		t.Fatalf("second application: the browser is at %q, want the consent page", loc)
	}
	title, err := chromedp.Run(step(5*time.Second), chromedp.Title())
	if err != nil || title != "Allow access? · palmgate" {
		t.Errorf("consent page title %q (%v)", title, err)
	}
	text, err := chromedp.Run(step(5*time.Second), chromedp.Text(chromedp.CSS("main")))
	if err != nil || !strings.Contains(text, "Palm News") || !strings.Contains(text, "Allow") || strings.Contains(text, "Simulate palm scan") {
		t.Errorf("consent page text (%v):\n%s\nwant the application's name, Allow, and no scan", err, text)
	}
	if err := chromedp.Do(step(10*time.Second), chromedp.Click(chromedp.CSS("#allow"))); err != nil {
		t.Fatalf("clicking Allow: %v", err)
	}
	reached(cbB, rpB.URL, "consent")
	if got := cbB.queries(); len(got) != 1 || !strings.Contains(got[0], "code=") {
		t.Fatalf("second application's callback %q, want one with a code", got)
	}

	// 3. prompt=none: straight back with a code.
	if _, err := chromedp.Run(step(20*time.Second), chromedp.NavigateResponse(e.authURL(b, "prompt", "none"))); err != nil {
		t.Fatalf("prompt=none: %v", err)
	}
	reached(cbB, rpB.URL, "prompt=none")
	if got := cbB.queries(); len(got) != 2 || !strings.Contains(got[1], "code=") {
		t.Fatalf("prompt=none callback %q, want a code", got)
	}
}
