package integration

// The single sign-on session (issue 21, item 5): browsers are HTTP clients with
// cookie jars of their own (testserver.NewBrowser), as a person's browser is.

import (
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
)

// ssoLifetime is the sso_session of these tests.
const ssoLifetime = time.Hour

// browser is a person's browser at a palmgate instance (or at several behind one
// issuer: the cookie jar ignores ports, as browsers do).
type browser struct {
	e *env
	c *http.Client
}

func newSSOBrowser(e *env) *browser { return &browser{e: e, c: testserver.NewBrowser()} }

// at is the same browser at another instance.
func (b *browser) at(e *env) *browser { return &browser{e: e, c: b.c} }

// do sends a request from the browser, with env's check that no response
// reveals a raw palm subject.
func (b *browser) do(t *testing.T, method, path string, body any, headers ...string) *testserver.Response {
	t.Helper()
	u := path
	if strings.HasPrefix(path, "/") {
		u = b.e.URL + path
	}
	resp := testserver.DoWith(t, b.c, method, u, body, headers...)
	b.e.mu.Lock()
	secrets := append([]string(nil), b.e.secrets...)
	b.e.mu.Unlock()
	for _, s := range secrets {
		if strings.Contains(string(resp.Body), s) {
			t.Errorf("%s: the response reveals the raw palm subject %q", resp.Request, s)
		}
	}
	return resp
}

// authorize sends an authorization request of c and returns the 302's Location.
func (b *browser) authorize(t *testing.T, c oidcClient, params ...string) string {
	t.Helper()
	resp := b.do(t, "GET", b.e.authURL(c, append([]string{"state", "st-sso"}, params...)...), nil)
	if resp.Status != http.StatusFound {
		t.Fatalf("%s: status %d, want 302 (never a page)\nbody: %s", resp.Request, resp.Status, testserver.Snippet(resp.Body))
	}
	return resp.Header.Get("Location")
}

// where says where an authorization request sent the browser.
type where int

const (
	toScan    where = iota // the login page: a palm scan
	toConsent              // the consent page
	toClient               // back to the client (a code or an error)
)

func (b *browser) classify(t *testing.T, issuer, loc string) (where, string) {
	t.Helper()
	if id, ok := strings.CutPrefix(loc, issuer+"/oauth2/verify?auth_request_id="); ok {
		return toScan, id
	}
	if id, ok := strings.CutPrefix(loc, issuer+"/oauth2/consent?auth_request_id="); ok {
		return toConsent, id
	}
	return toClient, ""
}

// scanLogin runs authorize (which must ask for a scan), the scan of subject and
// the redirect back; it returns the code and the finishing response (which sets
// the session cookie).
func (b *browser) scanLogin(t *testing.T, issuer string, c oidcClient, subject string, params ...string) (string, *testserver.Response) {
	t.Helper()
	w, id := b.classify(t, issuer, b.authorize(t, c, params...))
	if w != toScan {
		t.Fatalf("authorize %v: not sent to the login page, want a palm scan", params)
	}
	var page loginPage
	b.do(t, "GET", "/oauth2/verify?auth_request_id="+id, nil, "Accept", "application/json").ExpectStatus(t, http.StatusOK).Decode(t, &page)
	b.e.scan(t, page, subject)
	resp := b.do(t, "GET", "/oauth2/verify?auth_request_id="+id, nil)
	if resp.Status != http.StatusFound {
		t.Fatalf("%s: status %d, want 302 to the client", resp.Request, resp.Status)
	}
	q := callbackQuery(t, resp.Header.Get("Location"), c.redirects[0])
	if q.Get("code") == "" || q.Get("state") != "st-sso" {
		t.Fatalf("callback %v, want a code and the state", q)
	}
	return q.Get("code"), resp
}

// silent expects authorize to go straight back to c (no scan, no page) and
// returns the callback's code, or its error.
func (b *browser) silent(t *testing.T, issuer string, c oidcClient, params ...string) (code, oauthErr string) {
	t.Helper()
	loc := b.authorize(t, c, params...)
	if w, _ := b.classify(t, issuer, loc); w != toClient {
		t.Fatalf("authorize %v: Location %s, want straight back to the client", params, loc)
	}
	q := callbackQuery(t, loc, c.redirects[0])
	if q.Get("state") != "st-sso" || q.Get("iss") != issuer+"/oauth2" {
		t.Errorf("callback %v: want state st-sso and iss", q)
	}
	return q.Get("code"), q.Get("error")
}

var (
	consentCSRFRE = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)
	consentIDRE   = regexp.MustCompile(`name="auth_request_id" value="([^"]+)"`)
)

// consentForm reads the consent page of request id: the form's fields.
func (b *browser) consentForm(t *testing.T, id string) (reqID, token string) {
	t.Helper()
	resp := b.do(t, "GET", "/oauth2/consent?auth_request_id="+id, nil).ExpectStatus(t, http.StatusOK)
	if resp.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("consent page headers %v: want it never framed", resp.Header)
	}
	m, n := consentCSRFRE.FindSubmatch(resp.Body), consentIDRE.FindSubmatch(resp.Body)
	if m == nil || n == nil || string(n[1]) != id {
		t.Fatalf("consent page without its form for %s:\n%s", id, testserver.Snippet(resp.Body))
	}
	return string(n[1]), html.UnescapeString(string(m[1]))
}

// consent posts the consent form and returns the response.
func (b *browser) consent(t *testing.T, id, token, decision string) *testserver.Response {
	t.Helper()
	form := "auth_request_id=" + id + "&decision=" + decision
	if token != "" {
		form += "&csrf_token=" + token
	}
	return b.do(t, "POST", "/oauth2/consent", form, "Content-Type", "application/x-www-form-urlencoded")
}

// sessionCookie is the SSO session cookie a response sets, or nil.
func sessionCookie(resp *testserver.Response) *http.Cookie {
	for _, c := range (&http.Response{Header: resp.Header}).Cookies() {
		if c.Name == "palmgate_session" || c.Name == "__Host-palmgate_session" {
			return c
		}
	}
	return nil
}

func TestSSOSession(t *testing.T) {
	t.Parallel()
	a, b := newOIDCClient("sso-a", ""), newOIDCClient("sso-b", "")
	e := startOIDC(t, []oidcClient{a, b}, "sso_session 1h")
	issuer := e.URL
	alice := e.subject("alice")
	br := newSSOBrowser(e)

	// The first login scans and sets the session cookie: host-only, HttpOnly,
	// SameSite=Lax, path /, not Secure on an http issuer, living sso_session.
	codeA, finished := br.scanLogin(t, issuer, a, alice)
	ck := sessionCookie(finished)
	switch {
	case ck == nil:
		t.Fatalf("the finished login set no session cookie: %v", finished.Header["Set-Cookie"])
	case ck.Name != "palmgate_session" || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" || ck.Domain != "" || ck.Secure:
		t.Errorf("session cookie %q: want palmgate_session, HttpOnly, SameSite=Lax, Path=/, no Domain (host-only), not Secure on http", finished.Header["Set-Cookie"])
	case ck.MaxAge < int(ssoLifetime.Seconds())-60 || ck.MaxAge > int(ssoLifetime.Seconds()):
		t.Errorf("session cookie Max-Age %d, want about %d", ck.MaxAge, int(ssoLifetime.Seconds()))
	case len(ck.Value) != 43:
		t.Errorf("session cookie value of %d characters, want 256 random bits", len(ck.Value))
	}
	tokA := e.exchange(t, a, codeA, "")
	idA := jwtPart(t, str(tokA["id_token"]), 1)
	if idA["acr"] != "urn:palmgate:acr:palm" {
		t.Errorf("ID token acr %v, want urn:palmgate:acr:palm", idA["acr"])
	}

	// A second client in the same browser: the consent page, no scan; a form
	// without its CSRF token is refused, the one with it gets the code.
	w, id := br.classify(t, issuer, br.authorize(t, b))
	if w != toConsent {
		t.Fatalf("second client: not sent to the consent page")
	}
	reqID, token := br.consentForm(t, id)
	if resp := br.consent(t, reqID, "", "allow"); resp.Status != http.StatusForbidden || resp.Header.Get("Location") != "" {
		t.Errorf("consent without CSRF token: status %d Location %q, want 403 and no redirect", resp.Status, resp.Header.Get("Location"))
	}
	if resp := newSSOBrowser(e).consent(t, reqID, token, "allow"); resp.Status != http.StatusForbidden {
		t.Errorf("consent from another browser with the token: status %d, want 403", resp.Status)
	}
	resp := br.consent(t, reqID, token, "allow")
	if resp.Status != http.StatusFound {
		t.Fatalf("consent: status %d, want 302 to the client\n%s", resp.Status, testserver.Snippet(resp.Body))
	}
	q := callbackQuery(t, resp.Header.Get("Location"), b.redirects[0])
	if q.Get("code") == "" || q.Get("state") != "st-sso" {
		t.Fatalf("consent callback %v, want a code", q)
	}
	idB := jwtPart(t, str(e.exchange(t, b, q.Get("code"), "")["id_token"]), 1)
	if idB["sub"] == idA["sub"] || idB["auth_time"] != idA["auth_time"] {
		t.Errorf("second client: sub %v auth_time %v; want a sub of its own (pairwise) and the scan's auth_time %v", idB["sub"], idB["auth_time"], idA["auth_time"])
	}
	// Remembered: the second client now gets a code with prompt=none.
	if code, errCode := br.silent(t, issuer, b, "prompt", "none"); code == "" {
		t.Errorf("second client, prompt=none after consent: error %q, want a code", errCode)
	}

	// The first client again, prompt=none: a code; its auth_time is the scan's.
	code, errCode := br.silent(t, issuer, a, "prompt", "none")
	if code == "" {
		t.Fatalf("first client, prompt=none: error %q, want a code", errCode)
	}
	if got := jwtPart(t, str(e.exchange(t, a, code, "")["id_token"]), 1); got["auth_time"] != idA["auth_time"] || got["sub"] != idA["sub"] {
		t.Errorf("silent login: sub %v auth_time %v, want %v and %v", got["sub"], got["auth_time"], idA["sub"], idA["auth_time"])
	}

	// max_age=0 and prompt=login lead to a new scan.
	for _, p := range [][]string{{"max_age", "0"}, {"prompt", "login"}} {
		if w, _ := br.classify(t, issuer, br.authorize(t, a, p...)); w != toScan {
			t.Errorf("authorize %v: not sent to the login page, want a new scan", p)
		}
	}
	// max_age=0 with prompt=none cannot scan: login_required, by redirect.
	if _, errCode := br.silent(t, issuer, a, "max_age", "0", "prompt", "none"); errCode != "login_required" {
		t.Errorf("max_age=0 prompt=none: error %q, want login_required", errCode)
	}

	// Another browser never shares the session.
	other := newSSOBrowser(e)
	if _, errCode := other.silent(t, issuer, a, "prompt", "none"); errCode != "login_required" {
		t.Errorf("another browser, prompt=none: error %q, want login_required", errCode)
	}
	if w, _ := other.classify(t, issuer, other.authorize(t, a)); w != toScan {
		t.Error("another browser: not sent to the login page")
	}

	// Logout ends the session, on the server: the cookie is cleared, and the old
	// value replayed (a stolen cookie) is refused too.
	out := br.do(t, "GET", "/oauth2/logout", nil).ExpectStatus(t, http.StatusOK)
	if c := sessionCookie(out); c == nil || c.MaxAge >= 0 {
		t.Errorf("logout: Set-Cookie %q, want the session cookie cleared", out.Header["Set-Cookie"])
	}
	if _, errCode := br.silent(t, issuer, a, "prompt", "none"); errCode != "login_required" {
		t.Errorf("after logout, prompt=none: error %q, want login_required", errCode)
	}
	thief := newSSOBrowser(e)
	resp = thief.do(t, "GET", e.authURL(a, "prompt", "none", "state", "st-sso"), nil, "Cookie", "palmgate_session="+ck.Value)
	if q := callbackQuery(t, resp.Header.Get("Location"), a.redirects[0]); q.Get("error") != "login_required" {
		t.Errorf("the logged-out session id replayed: callback %v, want login_required", q)
	}
}

// TestSSOSessionOffByDefault: without sso_session a finished login sets no session
// cookie, and prompt=none stays login_required.
func TestSSOSessionOffByDefault(t *testing.T) {
	t.Parallel()
	a := newOIDCClient("sso-off", "")
	e := startOIDC(t, []oidcClient{a})
	br := newSSOBrowser(e)
	_, finished := br.scanLogin(t, e.URL, a, e.subject("alice"))
	if c := sessionCookie(finished); c != nil {
		t.Errorf("sso_session off set a session cookie: %v", finished.Header["Set-Cookie"])
	}
	if _, errCode := br.silent(t, e.URL, a, "prompt", "none"); errCode != "login_required" {
		t.Errorf("prompt=none: error %q, want login_required", errCode)
	}
}

// TestSSOSessionAcrossInstancesPostgres: two instances on one PostgreSQL database
// behind one issuer; the session a scan at one started is honoured by the other,
// and a logout at one ends it at the other at once (the store is read per
// authorization request: no staleness bound).
func TestSSOSessionAcrossInstancesPostgres(t *testing.T) {
	t.Parallel()
	a, b := newOIDCClient("sso-pg-a", ""), newOIDCClient("sso-pg-b", "")
	portA, issuer, cf := sharedCaddyfile(t, []oidcClient{a, b}, "sso_session 1h")
	ea, eb := start(t, testserver.Options{Port: portA, Caddyfile: cf}), start(t, testserver.Options{Caddyfile: cf})
	atA := newSSOBrowser(ea)
	atB := atA.at(eb)

	_, finished := atA.scanLogin(t, issuer, a, ea.subject("alice"))
	ck := sessionCookie(finished)
	if ck == nil {
		t.Fatal("the finished login set no session cookie")
	}
	if code, errCode := atB.silent(t, issuer, a, "prompt", "none"); code == "" {
		t.Fatalf("instance B, prompt=none in A's session: error %q, want a code", errCode)
	}
	// Consent at B is remembered at A.
	w, id := atB.classify(t, issuer, atB.authorize(t, b))
	if w != toConsent {
		t.Fatal("instance B, second client: not sent to the consent page")
	}
	reqID, token := atB.consentForm(t, id)
	if resp := atB.consent(t, reqID, token, "allow"); resp.Status != http.StatusFound {
		t.Fatalf("consent at B: status %d", resp.Status)
	}
	if code, errCode := atA.silent(t, issuer, b, "prompt", "none"); code == "" {
		t.Errorf("instance A, second client after consent at B: error %q, want a code", errCode)
	}
	// Logout at A; B refuses the session at once, even to a browser that still
	// sends the old cookie (a stale tab, a stolen copy).
	atA.do(t, "GET", "/oauth2/logout", nil).ExpectStatus(t, http.StatusOK)
	resp := newSSOBrowser(eb).do(t, "GET", eb.authURL(a, "prompt", "none", "state", "st-sso"), nil, "Cookie", ck.Name+"="+ck.Value)
	if q := callbackQuery(t, resp.Header.Get("Location"), a.redirects[0]); q.Get("error") != "login_required" {
		t.Errorf("instance B after logout at A, the old cookie: callback %v, want login_required", q)
	}
}
