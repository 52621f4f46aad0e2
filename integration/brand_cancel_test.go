package integration

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/internal/testserver"
)

var cancelFormRE = regexp.MustCompile(`<form method="post" action="/oauth2/verify/cancel" id="cancel-form"[^>]*><input type="hidden" name="auth_request_id" value="([^"]+)"><input type="hidden" name="csrf_token" value="([^"]+)">`)

// TestLoginBrandAndCancel (issue 22) runs through the real binary: the login page
// shows the brand of the Caddyfile's `brand` block (its CSP admitting the logo's
// origin for images), and its Cancel, posted by the browser that started the
// login, sends it back to the registered redirect_uri with error=access_denied,
// the request's state and iss; without the form's token, or from another
// browser, the Cancel is refused and the login stays pending.
func TestLoginBrandAndCancel(t *testing.T) {
	t.Parallel()
	shop := newOIDCClient("shop", "")
	e := startOIDC(t, []oidcClient{shop}, "brand {\n\tname \"Acme <ID>\"\n\tlogo_url https://cdn.acme.example/logo.svg\n\tcolor \"#0b5fff\"\n}")
	state := "st-" + randHex(8)
	id := e.authorize(t, e.authURL(shop, "state", state))
	page := e.do(t, "GET", e.verifyURL(id), nil).ExpectStatus(t, http.StatusOK)
	body := string(page.Body)
	for _, want := range []string{
		`<img id="brand-logo" src="https://cdn.acme.example/logo.svg" alt=""> Acme &lt;ID&gt;</div>`,
		":root{--accent:#0b5fff}",
		`<ul class="scopes" id="scopes">`,
		`<time class="local" datetime="`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("login page lacks %q:\n%s", want, testserver.Snippet(page.Body))
		}
	}
	if csp := page.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "img-src data: https://cdn.acme.example;") {
		t.Errorf("login page CSP %q, want img-src data: and the logo's origin", csp)
	}
	m := cancelFormRE.FindStringSubmatch(body)
	if m == nil || m[1] != id {
		t.Fatalf("login page has no Cancel form for %s:\n%s", id, testserver.Snippet(page.Body))
	}
	token := html.UnescapeString(m[2])
	form := func(token string) string {
		return url.Values{"auth_request_id": {id}, "csrf_token": {token}}.Encode()
	}
	const formType = "application/x-www-form-urlencoded"

	resp := e.do(t, "POST", "/oauth2/verify/cancel", form(""), "Content-Type", formType)
	if resp.Status != http.StatusForbidden || resp.Header.Get("Location") != "" {
		t.Errorf("Cancel without its token: %d Location %q, want 403 and no redirect", resp.Status, resp.Header.Get("Location"))
	}
	resp = testserver.DoWith(t, testserver.NewBrowser(), "POST", e.URL+"/oauth2/verify/cancel", form(token), "Content-Type", formType)
	if resp.Status != http.StatusForbidden || resp.Header.Get("Location") != "" {
		t.Errorf("Cancel from another browser: %d Location %q, want 403 and no redirect", resp.Status, resp.Header.Get("Location"))
	}
	if p := e.loginPageJSON(t, id); p.Status != "pending" {
		t.Fatalf("after the refused Cancels the login is %q, want pending", p.Status)
	}

	resp = e.do(t, "POST", "/oauth2/verify/cancel", form(token), "Content-Type", formType)
	if resp.Status != http.StatusFound {
		t.Fatalf("%s: status %d, want 302 to the client\nbody: %s", resp.Request, resp.Status, testserver.Snippet(resp.Body))
	}
	q := callbackQuery(t, resp.Header.Get("Location"), shop.redirects[0])
	if q.Get("error") != "access_denied" || q.Get("state") != state || q.Get("iss") != e.URL+"/oauth2" || q.Get("code") != "" {
		t.Errorf("Cancel: callback %v, want error=access_denied, state=%s, iss=%s/oauth2 and no code", q, state, e.URL)
	}
	expectOAuthError(t, e.do(t, "GET", e.verifyURL(id), nil), http.StatusBadRequest, "invalid_request")
}
