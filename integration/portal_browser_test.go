package integration

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/oauth2"
)

// TestPortalBrowser: in headless Chromium, a developer signs in to the portal
// with a simulated palm scan, creates an application and reads its secret; a
// user logs in to it with go-oidc; the developer rotates the secret (the old one
// works for its 10 s grace only), edits the redirect URIs (the removed one is
// refused) and deletes the application (its refresh token is refused). A form
// without its CSRF token is refused, and another developer cannot open the
// application's page.
func TestPortalBrowser(t *testing.T) {
	t.Parallel()
	step := newChromium(t)
	e := startOIDC(t, nil)
	redirect, other := "https://browser-portal.example/callback", "http://localhost:9999/cb"
	run := func(what string, d time.Duration, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(step(d), actions...); err != nil {
			loc, _ := chromedp.Run(step(2*time.Second), chromedp.Location())
			body, _ := chromedp.Run(step(2*time.Second), chromedp.Text(chromedp.CSS("body")))
			t.Fatalf("%s: %v (at %v)\npage: %s", what, err, loc, body)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(step(5*time.Second), chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("reading %s: %v", sel, err)
		}
		return strings.TrimSpace(s)
	}

	// Sign in: the portal's button leads to the provider's own login page.
	run("opening the portal and signing in", 20*time.Second,
		chromedp.Navigate(e.URL+"/portal"),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("#simulate-button")),
	)
	loc, err := chromedp.Run(step(5*time.Second), chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(loc, e.URL+"/oauth2/verify?auth_request_id=") {
		t.Fatalf("signing in led to %q, want the provider's login page", loc)
	}
	if page := text("main"); !strings.Contains(page, "palmgate developer portal") {
		t.Errorf("the login page does not name the portal:\n%s", page)
	}
	run("simulating the palm scan", 30*time.Second,
		chromedp.SetValue(chromedp.CSS(`input[name="palmSubject"]`), e.subject("browser-dev")),
		chromedp.Click(chromedp.CSS("#simulate-button")),
		chromedp.WaitVisible(chromedp.CSS("#create")),
	)

	// Create an application; its secret is shown once, with a copy button.
	run("creating an application", 15*time.Second,
		chromedp.SetValue(chromedp.CSS("#name"), "Browser App"),
		chromedp.SetValue(chromedp.CSS("#redirect_uris"), redirect+"\n"+other),
		chromedp.Click(chromedp.CSS("#create-button")),
		chromedp.WaitVisible(chromedp.CSS("#secret")),
		chromedp.WaitVisible(chromedp.CSS("#copy")),
	)
	id, secret := text("#client-id"), text("#secret")
	if !strings.HasPrefix(id, "pg_") || len(secret) != 43 {
		t.Fatalf("application page: client_id %q, secret %q", id, secret)
	}
	if got := text("#issuer"); got != e.URL+"/oauth2" {
		t.Errorf("issuer shown %q, want %q", got, e.URL+"/oauth2")
	}

	// A user logs in to it with go-oidc and x/oauth2.
	rp := newRelyingParty(t, e, oidcClient{id: id, secret: secret, redirects: []string{redirect}}, oauth2.AuthStyleInHeader, "openid", "offline_access")
	l := rp.login(t, e, e.subject("browser-portal-user"))
	var tok *oauth2.Token
	tok, err = rp.conf.Exchange(rp.ctx, l.code, oauth2.VerifierOption(l.verifier))
	if err != nil {
		t.Fatalf("exchanging a code of the application: %v", err)
	}
	idt, _ := rp.verifyIDToken(t, tok, l.nonce, l.scanned)
	e.expectUserinfo(t, tok.AccessToken, idt.Subject)

	// Rotate with a 10 s grace.
	// Each form is used from a fresh load of the application's page, which shows
	// neither a secret nor a message: what the wait finds is the answer's.
	run("rotating the secret", 15*time.Second,
		chromedp.Navigate(e.URL+"/portal/apps/"+id),
		chromedp.WaitVisible(chromedp.CSS("#rotate-button")),
		chromedp.SetValue(chromedp.CSS("#grace"), "10s"), // long enough for the checks within it on a loaded machine
		chromedp.Click(chromedp.CSS("#rotate-button")),
		chromedp.WaitVisible(chromedp.CSS("#secret")),
	)
	fresh := text("#secret")
	if fresh == secret || !e.authenticates(t, id, secret) || !e.authenticates(t, id, fresh) {
		t.Fatal("within the grace period both secrets must work, and the new one differ")
	}
	waitUntil(t, 20*time.Second, "the old secret stops after its 10s grace", func() bool { return !e.authenticates(t, id, secret) })
	rp.conf.ClientSecret = fresh

	// Edit the redirect URIs: the removed one is refused.
	run("editing the redirect URIs", 15*time.Second,
		chromedp.Navigate(e.URL+"/portal/apps/"+id),
		chromedp.WaitVisible(chromedp.CSS("#save")),
		chromedp.SetValue(chromedp.CSS("#redirect_uris"), other),
		chromedp.Click(chromedp.CSS("#save")),
		chromedp.WaitVisible(chromedp.CSS("#message")),
	)
	if got := text("#redirect-uris"); got != other {
		t.Errorf("redirect URIs after the edit: %q, want %q", got, other)
	}
	expectOAuthError(t, e.do(t, "GET", rp.conf.AuthCodeURL("st"), nil), http.StatusBadRequest, "invalid_request")

	// Another developer cannot open it.
	bob := e.portalSignIn(t, e.subject("browser-bob"))
	if r := bob.get(t, "/portal/apps/"+id); r.Status != http.StatusNotFound {
		t.Errorf("another developer opening the application: %d, want 404", r.Status)
	}

	// A form without its CSRF token is refused.
	if _, err := chromedp.Run(step(5*time.Second), chromedp.Evaluate[bool](`(() => { document.querySelector('#delete input[name="csrf"]').remove(); return true })()`)); err != nil {
		t.Fatalf("removing the CSRF field: %v", err)
	}
	run("posting the delete form without its CSRF token", 15*time.Second,
		chromedp.Click(chromedp.CSS("#delete-button")),
		chromedp.WaitVisible(chromedp.CSS("#error")),
	)
	if got := text("#error"); !strings.Contains(got, "CSRF") {
		t.Errorf("the refusal says %q, want a CSRF message", got)
	}
	if !e.authenticates(t, id, fresh) {
		t.Fatal("the refused delete deleted the application")
	}

	// Delete it: its refresh token is refused.
	run("deleting the application", 15*time.Second,
		chromedp.Navigate(e.URL+"/portal/apps/"+id),
		chromedp.WaitVisible(chromedp.CSS("#delete-button")),
		chromedp.Click(chromedp.CSS("#delete-button")),
		chromedp.WaitVisible(chromedp.CSS("#no-apps")),
	)
	_, err = rp.forceRefresh(tok.RefreshToken)
	expectRetrieveError(t, err, http.StatusUnauthorized, "invalid_client")
	e.expectRevoked(t, tok.AccessToken)
}
