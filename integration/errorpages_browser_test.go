package integration

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// overflowJS lists what overflows at the page's width: the page scrolling
// sideways, or an element whose text is cut (wider content than its box).
const overflowJS = `(function () {
  var out = [];
  if (document.documentElement.scrollWidth > window.innerWidth) {
    out.push("page " + document.documentElement.scrollWidth + " > " + window.innerWidth);
  }
  document.querySelectorAll("main, main *").forEach(function (el) {
    if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== "visible") {
      out.push((el.id || el.tagName) + " " + el.scrollWidth + " > " + el.clientWidth);
    }
    var r = el.getBoundingClientRect();
    if (r.right > window.innerWidth + 1) { out.push((el.id || el.tagName) + " ends at " + r.right); }
  });
  return out.join("; ");
})()`

// TestErrorPagesInChromium: a real browser (its own Accept header) sent to
// authorize with an unknown client gets the error page, not JSON, and so does
// the scan URL (the palm app page); at phone and desktop width neither scrolls
// sideways nor cuts its text, the long technical small print included.
func TestErrorPagesInChromium(t *testing.T) {
	c := newOIDCClient("shop", "")
	e := startOIDC(t, []oidcClient{c}, "palm_app_url https://apps.example.com/palm")
	s := e.initSession(t, newAgent(t, "chromium-"+randHex(4)).registration(time.Now()))
	scan := e.appLink(t, s.URL)
	step := newChromium(t)
	for _, width := range []int64{360, 900} {
		for _, tc := range []struct{ name, url, title, text string }{
			{"unknown client", e.authURL(c, "client_id", "nobody", "state", strings.Repeat("long-state-", 40)), "This application is not known here", "unknown client_id"},
			{"unregistered redirect_uri", e.authURL(c, "redirect_uri", "https://evil.example/"+strings.Repeat("a", 300)), "This sign-in link is not valid", "redirect_uri is not registered"},
			{"scan URL", scan, "Open this in your palm app", "Get the palm app"},
		} {
			if err := chromedp.Do(step(10*time.Second), chromedp.EmulateViewport(width, 800, chromedp.EmulateScale(1))); err != nil {
				t.Fatal(err)
			}
			resp, err := chromedp.Run(step(20*time.Second), chromedp.NavigateResponse(tc.url))
			if err != nil {
				t.Fatalf("%s at %dpx: %v", tc.name, width, err)
			}
			wantStatus := http.StatusBadRequest
			if tc.name == "scan URL" {
				wantStatus = http.StatusOK
			}
			if resp.Status != int64(wantStatus) || !strings.HasPrefix(resp.MimeType, "text/html") {
				t.Errorf("%s at %dpx: %d %s, want %d text/html", tc.name, width, resp.Status, resp.MimeType, wantStatus)
			}
			text, err := chromedp.Run(step(5*time.Second), chromedp.Evaluate[string](`document.body.innerText`))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(text, tc.title) || !strings.Contains(text, tc.text) || strings.HasPrefix(strings.TrimSpace(text), "{") {
				t.Errorf("%s at %dpx: the page shows:\n%s", tc.name, width, text)
			}
			over, err := chromedp.Run(step(5*time.Second), chromedp.Evaluate[string](overflowJS))
			if err != nil {
				t.Fatal(err)
			}
			if over != "" {
				t.Errorf("%s at %dpx overflows: %s", tc.name, width, over)
			}
		}
	}
}
