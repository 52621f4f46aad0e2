package integration

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/palmgate/palmgate/internal/tooltest"
)

// TestBrowserLoginPageGone (third review) opens the login page in headless
// Chromium, then ends the login from a second tab of the same browser (its
// Cancel), so that the login's records are gone for the first tab: its poll is
// now refused (400), and the page says the sign-in has expired or ended and to
// go back to the application, and drops the QR code and the Cancel. Before, it
// ignored the refusal and said "Waiting for your palm scan…" forever.
func TestBrowserLoginPageGone(t *testing.T) {
	t.Parallel()
	tooltest.Chromium.Need(t) // before any server starts

	cb := &callbackRecorder{hit: make(chan struct{}, 1)}
	rp := httptest.NewServer(cb)
	t.Cleanup(rp.Close)
	c := oidcClient{id: "gone-shop", secret: "secret-" + randHex(16), name: "Palm Shop", redirects: []string{rp.URL + "/callback"}, scopes: testScopes}
	e := startOIDC(t, []oidcClient{c})
	tabA := startChromium(t)
	tabB, closeB := chromedp.NewContext(tabA) // a second tab of the same browser: the same cookies
	t.Cleanup(closeB)

	if err := chromedp.Do(within(t, tabA, 20*time.Second), chromedp.Navigate(e.authURL(c)), chromedp.WaitVisible(chromedp.CSS("#cancel"))); err != nil {
		t.Fatalf("the first tab shows no login page: %v", err)
	}
	page, err := chromedp.Run(within(t, tabA, 5*time.Second), chromedp.Location())
	if err != nil || !strings.Contains(page, "/oauth2/verify?auth_request_id=") {
		t.Fatalf("the first tab is at %q (%v), want the login page", page, err)
	}
	if err := chromedp.Do(within(t, tabB, 20*time.Second), chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#cancel")), chromedp.Click(chromedp.CSS("#cancel"))); err != nil {
		t.Fatalf("the second tab's Cancel: %v", err)
	}
	select {
	case <-cb.hit:
	case <-time.After(browserWait):
		t.Fatalf("the second tab's Cancel did not reach the application within %s", browserWait)
	}

	// The first tab's next poll (every 2 s) is refused.
	if err := chromedp.Do(within(t, tabA, browserWait), chromedp.WaitVisible(chromedp.CSS(`#status[data-status="gone"]`))); err != nil {
		text, _ := chromedp.Run(within(t, tabA, 5*time.Second), chromedp.Text(chromedp.CSS("main")))
		t.Fatalf("the first tab did not say the sign-in ended within %s (%v); it shows:\n%s", browserWait, err, text)
	}
	text, err := chromedp.Run(within(t, tabA, 5*time.Second), chromedp.Text(chromedp.CSS("main")))
	if err != nil || !strings.Contains(text, "This sign-in has expired or has already ended.") ||
		!strings.Contains(text, "Go back to the application and sign in again.") || strings.Contains(text, "Waiting for your palm scan") {
		t.Errorf("the first tab shows (%v):\n%s\nwant the sign-in ended and to go back to the application", err, text)
	}
	left, err := chromedp.Run(within(t, tabA, 5*time.Second), chromedp.Evaluate[bool](`!!(document.getElementById("qr") || document.getElementById("cancel") || document.getElementById("scan"))`))
	if err != nil || left {
		t.Errorf("the first tab still shows the QR code or the Cancel (%v)", err)
	}
}
