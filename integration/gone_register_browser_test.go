package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/palmgate/palmgate/internal/pgtest"
	"github.com/palmgate/palmgate/internal/testserver"
	"github.com/palmgate/palmgate/internal/tooltest"
)

// TestBrowserRegistrationPageGone (third review) opens agent registration pages
// in headless Chromium on a PostgreSQL store.
//   - A registration declined from a second tab of the same browser ("This is not
//     my agent") still shows the first tab its failed state: its poll sees the
//     denied challenge and the page reloads to it, not to the gone words.
//   - A registration whose records are gone (deleted from palmgate_kv, as the
//     sweeper collects them after the expiry, without waiting for one): the
//     page's poll is refused (404), and the page says the registration has
//     expired or ended and to ask the agent to start again, and drops the QR
//     code and the decline. Before, it said "Waiting for your palm scan…"
//     forever.
func TestBrowserRegistrationPageGone(t *testing.T) {
	t.Parallel()
	tooltest.Chromium.Need(t) // before any server starts
	dsn := pgtest.DSN(t)
	e := start(t, testserver.Options{Storage: fmt.Sprintf("storage postgres %q", dsn)})
	tabA := startChromium(t)
	tabB, closeB := chromedp.NewContext(tabA) // a second tab of the same browser: the same cookies
	t.Cleanup(closeB)
	shows := func(tab context.Context) string {
		text, _ := chromedp.Run(within(t, tab, 5*time.Second), chromedp.Text(chromedp.CSS("main")))
		return text
	}
	open := func(tab context.Context, url string) {
		t.Helper()
		if err := chromedp.Do(within(t, tab, 20*time.Second), chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("#cancel"))); err != nil {
			t.Fatalf("no registration page with its decline at %s: %v", url, err)
		}
	}

	// Declined in tab B: tab A shows the failed registration.
	declined := e.initSession(t, newAgent(t, "declined-"+randHex(4)).registration(time.Now()))
	open(tabA, declined.URL)
	open(tabB, declined.URL)
	if err := chromedp.Do(within(t, tabB, 20*time.Second), chromedp.Click(chromedp.CSS("#cancel")),
		chromedp.WaitVisible(chromedp.CSS(`#status[data-status="denied"]`))); err != nil {
		t.Fatalf("the second tab's decline: %v; it shows:\n%s", err, shows(tabB))
	}
	if err := chromedp.Do(within(t, tabA, browserWait), chromedp.WaitVisible(chromedp.CSS(`#status[data-status="denied"]`))); err != nil {
		t.Fatalf("the first tab did not show the declined registration within %s (%v); it shows:\n%s", browserWait, err, shows(tabA))
	}
	if text := shows(tabA); !strings.Contains(text, "Registration failed: it was declined") || strings.Contains(text, "already ended") {
		t.Errorf("the first tab shows:\n%s\nwant the registration failed (declined), not gone", text)
	}

	// Gone: its records deleted from the store.
	gone := e.initSession(t, newAgent(t, "gone-"+randHex(4)).registration(time.Now()))
	open(tabA, gone.URL)
	tag, err := pgConnect(t, dsn).Exec(context.Background(), `DELETE FROM palmgate_kv WHERE key = $1`, []byte("agent/s/"+gone.ID))
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("deleting the session's record: %v (%d rows)", err, tag.RowsAffected())
	}
	if err := chromedp.Do(within(t, tabA, browserWait), chromedp.WaitVisible(chromedp.CSS(`#status[data-status="gone"]`))); err != nil {
		t.Fatalf("the page did not say the registration ended within %s (%v); it shows:\n%s", browserWait, err, shows(tabA))
	}
	if text := shows(tabA); !strings.Contains(text, "This registration request has expired or has already ended.") ||
		!strings.Contains(text, "Ask the agent to start again.") || strings.Contains(text, "Waiting for your palm scan") {
		t.Errorf("the page shows:\n%s\nwant the registration ended and to ask the agent to start again", text)
	}
	left, err := chromedp.Run(within(t, tabA, 5*time.Second), chromedp.Evaluate[bool](`!!(document.getElementById("qr") || document.getElementById("cancel") || document.getElementById("scan"))`))
	if err != nil || left {
		t.Errorf("the page still shows the QR code or the decline (%v)", err)
	}
}

// TestBrowserAgentsPageGone (third review) opens the agents page's palm step in
// headless Chromium on a PostgreSQL store, then deletes its owner session from
// palmgate_kv (as the sweeper collects it after the expiry, without waiting for
// one). The page's poll is refused (404), and the page says the palm
// verification has expired or ended and to reload, drops the QR code, and does
// not start a new palm challenge by itself. Before, the poll was a 200
// "expired", on which the page reloaded and showed a new QR code.
func TestBrowserAgentsPageGone(t *testing.T) {
	t.Parallel()
	tooltest.Chromium.Need(t) // before any server starts
	dsn := pgtest.DSN(t)
	e := start(t, testserver.Options{Storage: fmt.Sprintf("storage postgres %q", dsn)})
	tab := startChromium(t)
	shows := func() string {
		text, _ := chromedp.Run(within(t, tab, 5*time.Second), chromedp.Text(chromedp.CSS("main")))
		return text
	}
	if err := chromedp.Do(within(t, tab, 20*time.Second), chromedp.Navigate(e.URL+"/v1/human/agents"), chromedp.WaitVisible(chromedp.CSS("#qr"))); err != nil {
		t.Fatalf("no palm step on the agents page: %v", err)
	}
	got, err := chromedp.Call(within(t, tab, 5*time.Second), network.GetCookies, network.GetCookiesParams{URLs: []string{e.URL + "/v1/human/agents"}})
	cookies := got.Cookies
	var secret string
	for _, c := range cookies {
		if c.Name == "palmgate_agents" {
			secret = c.Value
		}
	}
	if err != nil || secret == "" {
		t.Fatalf("the agents page's cookie: %v (%d cookies)", err, len(cookies))
	}
	sum := sha256.Sum256([]byte(secret))
	tag, err := pgConnect(t, dsn).Exec(context.Background(), `DELETE FROM palmgate_kv WHERE key = $1`, []byte("agent/o/"+hex.EncodeToString(sum[:])))
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("deleting the owner session's record: %v (%d rows)", err, tag.RowsAffected())
	}
	if err := chromedp.Do(within(t, tab, browserWait), chromedp.WaitVisible(chromedp.CSS(`#status[data-status="gone"]`))); err != nil {
		t.Fatalf("the page did not say the verification ended within %s (%v); it shows:\n%s", browserWait, err, shows())
	}
	if text := shows(); !strings.Contains(text, "This palm verification has expired or has already ended.") ||
		!strings.Contains(text, "Reload this page to start again.") || strings.Contains(text, "Waiting for your palm scan") {
		t.Errorf("the page shows:\n%s\nwant the verification ended and to reload", text)
	}
	left, err := chromedp.Run(within(t, tab, 5*time.Second), chromedp.Evaluate[bool](`!!(document.getElementById("qr") || document.getElementById("scan"))`))
	if err != nil || left {
		t.Errorf("the page still shows the QR code (%v)", err)
	}
}
