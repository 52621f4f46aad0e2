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

// portalDev is a developer signed in to the portal, in a browser of their own
// (an HTTP client with a cookie jar that does not follow redirects).
type portalDev struct {
	e *env
	c *http.Client
}

var (
	csrfRE     = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	clientIDRE = regexp.MustCompile(`id="client-id">([^<]+)<`)
	secretRE   = regexp.MustCompile(`id="secret">([^<]+)<`)
)

// portalSignIn signs subject in to the portal through the provider's own login:
// /portal/login, /oauth2/authorize, the login page, a simulated palm scan, the
// callback.
func (e *env) portalSignIn(t *testing.T, subject string) *portalDev {
	t.Helper()
	d := &portalDev{e: e, c: testserver.NewBrowser()}
	r := d.get(t, "/portal/login")
	authURL := r.Header.Get("Location")
	if r.Status != http.StatusFound || !strings.HasPrefix(authURL, e.URL+"/oauth2/authorize?") {
		t.Fatalf("/portal/login: %d to %q, want 302 to the provider's authorize endpoint", r.Status, authURL)
	}
	q, _ := url.Parse(authURL)
	if q.Query().Get("client_id") != "palmgate-portal" || q.Query().Get("code_challenge_method") != "S256" {
		t.Errorf("the portal's authorization request %s: want client_id palmgate-portal with S256 PKCE", authURL)
	}
	r = d.get(t, authURL)
	id, ok := strings.CutPrefix(r.Header.Get("Location"), e.URL+"/oauth2/verify?auth_request_id=")
	if r.Status != http.StatusFound || !ok {
		t.Fatalf("authorize: %d %s", r.Status, r.Body)
	}
	var p loginPage
	d.get(t, e.verifyURL(id), "Accept", "application/json").ExpectStatus(t, http.StatusOK).Decode(t, &p)
	e.scan(t, p, subject)
	r = d.get(t, e.verifyURL(id))
	cb := r.Header.Get("Location")
	if r.Status != http.StatusFound || !strings.HasPrefix(cb, e.URL+"/portal/callback?") {
		t.Fatalf("login page after the scan: %d to %q, want the portal's callback", r.Status, cb)
	}
	r = d.get(t, cb)
	if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/portal" {
		t.Fatalf("portal callback: %d %s", r.Status, testserver.Snippet(r.Body))
	}
	for _, c := range r.Header.Values("Set-Cookie") {
		if strings.HasPrefix(c, "palmgate_portal=") && (!strings.Contains(c, "HttpOnly") || !strings.Contains(c, "SameSite=Lax") || !strings.Contains(c, "Max-Age=")) {
			t.Errorf("session cookie %q: want HttpOnly, SameSite=Lax and an expiry", c)
		}
	}
	if home := d.get(t, "/portal"); home.Status != http.StatusOK || !strings.Contains(string(home.Body), `id="create"`) {
		t.Fatalf("/portal after signing in: %d %s", home.Status, testserver.Snippet(home.Body))
	}
	return d
}

func (d *portalDev) get(t *testing.T, path string, headers ...string) *testserver.Response {
	t.Helper()
	u := path
	if strings.HasPrefix(path, "/") {
		u = d.e.URL + path
	}
	return testserver.DoWith(t, d.c, "GET", u, nil, headers...)
}

// csrf is the CSRF token of the developer's forms.
func (d *portalDev) csrf(t *testing.T) string {
	t.Helper()
	m := csrfRE.FindSubmatch(d.get(t, "/portal").Body)
	if m == nil {
		t.Fatal("no CSRF token on /portal")
	}
	return string(m[1])
}

// post posts form to path as is (add "csrf" to it for a valid form).
func (d *portalDev) post(t *testing.T, path string, form url.Values) *testserver.Response {
	t.Helper()
	return testserver.DoWith(t, d.c, "POST", d.e.URL+path, form.Encode(), "Content-Type", "application/x-www-form-urlencoded")
}

// create registers an application and returns its client_id and secret.
func (d *portalDev) create(t *testing.T, name string, uris ...string) (id, secret string) {
	t.Helper()
	r := d.post(t, "/portal/apps", url.Values{"csrf": {d.csrf(t)}, "name": {name}, "redirect_uris": {strings.Join(uris, "\n")}})
	if r.Status != http.StatusOK {
		t.Fatalf("creating %q: %d %s", name, r.Status, testserver.Snippet(r.Body))
	}
	return pageClient(t, r.Body)
}

// pageClient reads the client_id and the secret an application page shows.
func pageClient(t *testing.T, body []byte) (id, secret string) {
	t.Helper()
	m, s := clientIDRE.FindSubmatch(body), secretRE.FindSubmatch(body)
	if m == nil || s == nil {
		t.Fatalf("no client_id or secret on the page:\n%s", testserver.Snippet(body))
	}
	return html.UnescapeString(string(m[1])), html.UnescapeString(string(s[1]))
}
