package integration

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/palmgate/palmgate/internal/tooltest"
)

// TestAgentsPageLinkedFromAnotherSite (third review): a person verified on the
// agents page follows a link to it from another site (a mail, an application's
// settings page). Chromium withholds the page's SameSite=Strict cookie on that
// cross-site navigation, so palmgate saw no session and started a new palm
// challenge, replacing the verified session's cookie: the person, verified a
// minute ago, is asked to scan again, and the page they had open is signed out
// (its next form is refused), while the verified session stays live unreachable.
func TestAgentsPageLinkedFromAnotherSite(t *testing.T) {
	t.Parallel()
	tooltest.Chromium.Need(t) // before any server starts

	e := startOIDC(t, nil)
	alice := e.subject("crosssite-alice")
	bot := newAgent(t, "crosssite-bot-"+randHex(4))
	e.register(t, bot, alice)
	page := e.URL
	linker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>Mail</title><a id="manage" href="%s/v1/human/agents">Manage your agents</a>`, page)
	}))
	t.Cleanup(linker.Close)
	linkerURL := strings.Replace(linker.URL, "127.0.0.1", "localhost", 1) // another site than palmgate's
	if linkerURL == linker.URL || !strings.Contains(e.URL, "127.0.0.1") {
		t.Fatalf("the servers are not on 127.0.0.1 (%s, %s): the test needs palmgate and the linking site on different hosts", e.URL, linker.URL)
	}

	step := newChromium(t)
	if err := chromedp.Do(step(20*time.Second), chromedp.Navigate(page+"/v1/human/agents")); err != nil {
		t.Fatalf("opening the agents page: %v", err)
	}
	if err := chromedp.Do(step(10*time.Second),
		chromedp.WaitVisible(chromedp.ID("simulate-button")),
		chromedp.SetValue(chromedp.CSS(`input[name="palmSubject"]`), alice),
		chromedp.Click(chromedp.ID("simulate-button"))); err != nil {
		t.Fatalf("the simulated palm scan: %v", err)
	}
	listed := `tr[data-device-id="` + bot.deviceID + `"]`
	if err := chromedp.Do(step(browserWait), chromedp.WaitVisible(chromedp.CSS(listed))); err != nil {
		t.Fatalf("the verified page does not list the agent: %v", err)
	}

	// The link from the other site.
	if err := chromedp.Do(step(10*time.Second), chromedp.Navigate(linkerURL)); err != nil {
		t.Fatalf("opening the linking page: %v", err)
	}
	if err := chromedp.Do(step(10*time.Second), chromedp.Click(chromedp.ID("manage"))); err != nil {
		t.Fatalf("following the link: %v", err)
	}
	// The linking page has no <main>: this waits for palmgate's page, rendered whole
	// by the server.
	if err := chromedp.Do(step(browserWait), chromedp.WaitVisible(chromedp.CSS("main"))); err != nil {
		t.Fatal(err)
	}
	n, err := chromedp.Run(step(5*time.Second), chromedp.Evaluate[int](`document.querySelectorAll('`+listed+`').length + (document.getElementById("simulate-button") ? 100 : 0)`))
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		text, _ := chromedp.Run(step(5*time.Second), chromedp.Text(chromedp.CSS("main")))
		t.Fatalf("after the link from another site the agents page shows (%d):\n%s\nwant the verified list, not a new palm challenge", n, text)
	}
}
