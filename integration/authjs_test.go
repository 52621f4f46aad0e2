package integration

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/palmgate/palmgate/internal/testserver"
	"github.com/palmgate/palmgate/internal/tooltest"
)

// TestRelyingPartyAuthJS: Auth.js (@auth/express, integration/rp/authjs, installed
// with npm ci from its committed package-lock.json) with its stock provider
// configuration, issuer, client id and secret and type "oidc" only, logs in through
// headless Chromium: its default scopes `openid profile email` are granted, and the
// user it shows is palmgate's pseudonymous preferred_username (issue 21, items 1
// and 4 a).
func TestRelyingPartyAuthJS(t *testing.T) {
	t.Parallel()
	node := tooltest.Node.Need(t)
	tooltest.Chromium.Need(t)
	npmCI(t, "rp/authjs")
	port := testserver.FreePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	c := oidcClient{id: "my-app", secret: "secret-" + randHex(16), name: "My App",
		redirects: []string{base + "/auth/callback/palmgate"}}
	e := startOIDC(t, []oidcClient{c})
	cmd := exec.Command(node, "app.mjs")
	cmd.Dir = "rp/authjs"
	cmd.Env = append(os.Environ(), "ISSUER="+e.URL+"/oauth2", "AUTH_CLIENT_SECRET="+c.secret,
		"AUTH_SECRET="+randHex(32), fmt.Sprintf("PORT=%d", port))
	rp := startRP(t, cmd)
	if rp.base != base {
		t.Fatalf("Auth.js listens on %s, want %s", rp.base, base)
	}

	ctx := startChromium(t)
	browserStep(t, ctx, "opening Auth.js's sign-in page, choosing palmgate and reaching the login page",
		chromedp.Navigate(base+"/auth/signin?callbackUrl="+url.QueryEscape(base+"/")),
		chromedp.WaitVisible(chromedp.CSS(`form[action$="/auth/signin/palmgate"] button`)),
		chromedp.Click(chromedp.CSS(`form[action$="/auth/signin/palmgate"] button`)),
		chromedp.WaitVisible(chromedp.ID("simulate-button")),
		chromedp.SetValue(chromedp.CSS(`input[name="palmSubject"]`), e.subject("authjs-user")),
		chromedp.Click(chromedp.ID("simulate-button")),
	)
	browserStep(t, ctx, "coming back to Auth.js after the palm scan", chromedp.WaitVisible(chromedp.ID("rp-done")))
	rc, cancel := context.WithTimeout(ctx, rpStep)
	defer cancel()
	done, err := chromedp.Run(rc, chromedp.Text(chromedp.ID("rp-done")))
	if err != nil {
		t.Fatal(err)
	}
	session, err := chromedp.Run(rc, chromedp.Text(chromedp.ID("rp-session")))
	if err != nil {
		t.Fatal(err)
	}
	name, ok := strings.CutPrefix(strings.TrimSpace(done), "signed in as ")
	if !ok || !strings.HasPrefix(name, "user-") || len(name) != len("user-")+10 {
		t.Fatalf("Auth.js shows %q: want a user named by palmgate's preferred_username\nsession %s\n%s", done, session, rp.log.String())
	}
	// palmgate has no email to give: the session holds none.
	if strings.Contains(session, "@") {
		t.Errorf("Auth.js's session has an email palmgate never gave: %s", session)
	}
}

// TestClientsDocAuthJSSnippet: docs/CLIENTS.md's Auth.js configuration is, word for
// word, the one TestRelyingPartyAuthJS runs.
func TestClientsDocAuthJSSnippet(t *testing.T) {
	doc, err := os.ReadFile("../docs/CLIENTS.md")
	if err != nil {
		t.Fatal(err)
	}
	s := snippet(t, "rp/authjs/app.mjs")
	if !strings.Contains(string(doc), "```js\n"+s+"```\n") {
		t.Errorf("docs/CLIENTS.md lacks the Auth.js configuration of rp/authjs/app.mjs, which is:\n%s", s)
	}
}
