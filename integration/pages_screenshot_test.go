package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// layoutProblems is a script for the page in the browser: the reasons its layout
// fails, as strings; none when the page fits the viewport and shows all its text.
// It flags a page wider than the viewport (horizontal overflow), an element that
// clips its own content (overflow hidden or clip, or an ellipsis, with more content
// than room) and an element that sticks out of the viewport's right edge. Form
// fields scroll their own text and are left out.
const layoutProblems = `(() => {
  const out = [];
  const de = document.documentElement;
  if (de.scrollWidth > de.clientWidth) out.push('the page is ' + de.scrollWidth + 'px wide in a ' + de.clientWidth + 'px viewport');
  const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (el.className && typeof el.className === 'string' ? '.' + el.className.split(' ').join('.') : '');
  for (const el of document.body.querySelectorAll('*')) {
    if (['INPUT', 'TEXTAREA', 'SELECT', 'OPTION', 'SCRIPT', 'STYLE'].includes(el.tagName)) continue;
    const cs = getComputedStyle(el);
    if (cs.display === 'none' || cs.visibility === 'hidden') continue;
    const clipX = ['hidden', 'clip'].includes(cs.overflowX) || cs.textOverflow === 'ellipsis';
    const clipY = ['hidden', 'clip'].includes(cs.overflowY);
    if (clipX && el.scrollWidth > el.clientWidth + 1) out.push(name(el) + ' cuts its text: ' + el.scrollWidth + 'px of content in ' + el.clientWidth + 'px');
    if (clipY && el.scrollHeight > el.clientHeight + 1) out.push(name(el) + ' cuts its text: ' + el.scrollHeight + 'px of content in ' + el.clientHeight + 'px high');
    const r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > de.clientWidth + 1 && !el.closest('pre')) out.push(name(el) + ' ends at ' + Math.round(r.right) + 'px, beyond the ' + de.clientWidth + 'px viewport');
  }
  return out;
})()`

// portalLayout is a script for an application's page: what is wrong with how its
// snippets and copy buttons are laid out (each snippet a figure with its own title
// and copy button; a copy button for the client_id).
const portalLayout = `(() => {
  const out = [];
  const pres = document.querySelectorAll('pre[id^="snippet-"]');
  if (pres.length < 3) out.push('only ' + pres.length + ' snippets');
  for (const pre of pres) {
    const fig = pre.closest('figure');
    if (!fig) { out.push(pre.id + ' is not in a figure'); continue; }
    const cap = fig.querySelector('figcaption');
    if (!cap || !cap.textContent.trim()) out.push(pre.id + ' has no title of its own');
    if (!cap || !cap.querySelector('button[data-copy="' + pre.id + '"]')) out.push(pre.id + "'s copy button is not in its figure's title");
    if (fig.querySelectorAll('pre[id^="snippet-"]').length !== 1) out.push(pre.id + "'s figure holds another snippet");
    if (getComputedStyle(pre).overflowX !== 'auto' && getComputedStyle(pre).overflowX !== 'scroll') out.push(pre.id + ' does not scroll its long lines');
  }
  if (!document.querySelector('button[data-copy="client-id"]')) out.push('no copy button for the client_id');
  return out;
})()`

// TestPagesScreenshots: in headless Chromium, the login page, an error page (a
// refused sign-out, 400; the portal's 404) and the portal's application page, at
// desktop width (1280 px) and phone width (390 px), fit the viewport and cut no
// text; the application page lays out each snippet as a figure with its own title
// and copy button. The screenshots (the whole page as JPEG, the first screenful as
// PNG) go to $PALMGATE_SCREENSHOTS, or a temporary directory.
func TestPagesScreenshots(t *testing.T) {
	t.Parallel()
	step := newChromium(t)
	e := startOIDC(t, nil)
	dir := os.Getenv("PALMGATE_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(step(30*time.Second), actions...); err != nil {
			loc, _ := chromedp.Run(step(2*time.Second), chromedp.Location())
			t.Fatalf("%s: %v (at %v)", what, err, loc)
		}
	}
	widths := []struct {
		name          string
		width, height int64
		mobile        bool
	}{{"desktop", 1280, 900, false}, {"phone", 390, 844, true}}
	// check loads url at each width (ready when sel shows), saves a screenshot and
	// fails on what layoutProblems (and extra, if any) finds.
	check := func(page, url, sel, extra string) {
		t.Helper()
		for _, w := range widths {
			opts := []chromedp.EmulateViewportOption{}
			if w.mobile {
				opts = append(opts, chromedp.EmulateMobile)
			}
			run(fmt.Sprintf("opening the %s at %s width", page, w.name),
				chromedp.EmulateViewport(w.width, w.height, opts...),
				chromedp.Navigate(url),
				chromedp.WaitVisible(chromedp.CSS(sel)),
			)
			shot, err := chromedp.Run(step(30*time.Second), chromedp.FullScreenshot(80))
			if err != nil {
				t.Fatalf("screenshot of the %s at %s width: %v", page, w.name, err)
			}
			file := filepath.Join(dir, strings.ReplaceAll(page, " ", "-")+"-"+w.name+".jpg")
			if err := os.WriteFile(file, shot, 0o644); err != nil {
				t.Fatal(err)
			}
			// And the first screenful as PNG, what docs/PAGES.md shows.
			top, err := chromedp.Run(step(30*time.Second), chromedp.CaptureScreenshot())
			if err != nil {
				t.Fatalf("screenshot of the %s at %s width: %v", page, w.name, err)
			}
			if err := os.WriteFile(strings.TrimSuffix(file, ".jpg")+".png", top, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, script := range []string{layoutProblems, extra} {
				if script == "" {
					continue
				}
				problems, err := chromedp.Run(step(10*time.Second), chromedp.Evaluate[[]string](script))
				if err != nil {
					t.Fatalf("checking the %s at %s width: %v", page, w.name, err)
				}
				if len(problems) > 0 {
					t.Errorf("the %s at %s width (screenshot %s):\n  %s", page, w.name, file, strings.Join(problems, "\n  "))
				}
			}
		}
	}

	// The login page, reached as a developer signing in to the portal.
	run("signing in to the portal", chromedp.Navigate(e.URL+"/portal/login"), chromedp.WaitVisible(chromedp.CSS("#simulate-button")))
	login, err := chromedp.Run(step(5*time.Second), chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	check("login page", login, "#simulate-button", "")

	// The check can fail: a wide element and one that clips its text are found.
	problems, err := chromedp.Run(step(10*time.Second), chromedp.Evaluate[[]string](`(() => {
  const wide = document.createElement('div'); wide.id = 'too-wide'; wide.style.minWidth = '3000px'; wide.style.flex = 'none'; wide.textContent = 'x';
  const cut = document.createElement('div'); cut.id = 'cut'; cut.style.width = '40px'; cut.style.flex = 'none'; cut.style.overflow = 'hidden'; cut.style.whiteSpace = 'nowrap';
  cut.textContent = 'a line far longer than forty pixels';
  document.body.append(wide, cut);
  return `+layoutProblems+`;
})()`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(problems, "\n"); !strings.Contains(got, "the page is") || !strings.Contains(got, "div#too-wide ends at") || !strings.Contains(got, "div#cut cuts its text") {
		t.Fatalf("the layout check misses an overflowing page or a clipped text; it found:\n%s", got)
	}

	// Error pages: a sign-out refused (400) and a page the portal does not have (404).
	check("sign-out error page", e.URL+"/oauth2/logout?id_token_hint=not-a-token", "main", "")
	check("portal 404 page", e.URL+"/portal/no-such-page", "#error", "")

	// The portal's application page, for an application with a long redirect URI.
	run("simulating the palm scan",
		chromedp.Navigate(login),
		chromedp.WaitVisible(chromedp.CSS("#simulate-button")),
		chromedp.SetValue(chromedp.CSS(`input[name="palmSubject"]`), e.subject("screenshot-dev")),
		chromedp.Click(chromedp.CSS("#simulate-button")),
		chromedp.WaitVisible(chromedp.CSS("#create")),
	)
	long := "https://a-rather-long-application-host-name.example.com/auth/callback/with/a/long/path/that/does/not/fit/a/phone"
	run("creating an application",
		chromedp.SetValue(chromedp.CSS("#name"), "Screenshot App"),
		chromedp.SetValue(chromedp.CSS("#redirect_uris"), long+"\nhttp://localhost:3000/callback"),
		chromedp.Click(chromedp.CSS("#create-button")),
		chromedp.WaitVisible(chromedp.CSS("#secret")),
	)
	id, err := chromedp.Run(step(5*time.Second), chromedp.Text(chromedp.CSS("#client-id")))
	if err != nil {
		t.Fatal(err)
	}
	check("portal application page", e.URL+"/portal/apps/"+strings.TrimSpace(id), "#figure-go", portalLayout)
	// A snippet's figure at phone width (the last one checked), for docs/PAGES.md.
	fig, err := chromedp.Run(step(30*time.Second), chromedp.Screenshot(chromedp.CSS("#figure-node")))
	if err != nil {
		t.Fatalf("screenshot of a snippet: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "portal-snippet-phone.png"), fig, 0o644); err != nil {
		t.Fatal(err)
	}
	check("portal home", e.URL+"/portal", "#apps", "")
	t.Logf("screenshots in %s", dir)
}
