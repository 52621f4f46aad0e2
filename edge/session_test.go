package edge_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

func withSSO(d time.Duration) func(*envOptions) {
	return func(o *envOptions) { o.ssoSession = d }
}

var consentTokenRE = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// cookieNamed is the cookie w sets under name, or nil.
func cookieNamed(w interface{ Result() *http.Response }, name string) *http.Cookie {
	for _, c := range w.Result().Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// TestSSOSessionCookieAndConsentPage drives the SSO session over an https issuer:
// the session cookie's attributes, the consent page and the refusals of its form
// (each a page with a 4xx, never a 500 or a redirect), prompt=none's redirect, and
// logout clearing the cookie.
func TestSSOSessionCookieAndConsentPage(t *testing.T) {
	e := newEnv(t, withSSO(12*time.Hour))
	l := e.authorize(t, authorizeQuery())
	id, nonce := e.challenge(t, l)
	e.devScan(t, id, nonce, "alice")
	w := e.do(t, req{method: http.MethodGet, target: "/oauth2/verify?auth_request_id=" + l.id, cookies: []*http.Cookie{l.cookie}})
	wantStatus(t, w, http.StatusFound)
	sess := cookieNamed(w, "__Host-palmgate_session")
	switch {
	case sess == nil:
		t.Fatalf("the finished login set no __Host-palmgate_session cookie: %v", w.Header()["Set-Cookie"])
	case !sess.Secure || !sess.HttpOnly || sess.SameSite != http.SameSiteLaxMode || sess.Path != "/" || sess.Domain != "":
		t.Errorf("session cookie %q: want Secure, HttpOnly, SameSite=Lax, Path=/ and no Domain", w.Header()["Set-Cookie"])
	case sess.MaxAge < int((12*time.Hour).Seconds())-60 || sess.MaxAge > int((12*time.Hour).Seconds()):
		t.Errorf("session cookie Max-Age %d, want about 12h", sess.MaxAge)
	}

	// prompt=none within the session: straight back with a code.
	q := authorizeQuery()
	q.Set("prompt", "none")
	w = e.do(t, req{method: http.MethodGet, target: "/oauth2/authorize?" + q.Encode(), cookies: []*http.Cookie{sess}})
	wantStatus(t, w, http.StatusFound)
	if loc, _ := url.Parse(w.Header().Get("Location")); !strings.HasPrefix(loc.String(), testRedirect+"?") || loc.Query().Get("code") == "" {
		t.Fatalf("prompt=none in the session: Location %q, want a code at the redirect_uri", loc)
	}
	// prompt=none without it: login_required, by redirect, never a page.
	w = e.get(t, "/oauth2/authorize?"+q.Encode())
	wantStatus(t, w, http.StatusFound)
	if loc, _ := url.Parse(w.Header().Get("Location")); loc.Query().Get("error") != "login_required" {
		t.Errorf("prompt=none without a session: Location %q, want error=login_required", loc)
	}

	// prompt=consent: the consent page.
	q = authorizeQuery()
	q.Set("prompt", "consent")
	w = e.do(t, req{method: http.MethodGet, target: "/oauth2/authorize?" + q.Encode(), cookies: []*http.Cookie{sess}})
	wantStatus(t, w, http.StatusFound)
	loc, _ := url.Parse(w.Header().Get("Location"))
	if loc.Path != "/oauth2/consent" {
		t.Fatalf("prompt=consent: Location %q, want the consent page", loc)
	}
	reqID := loc.Query().Get("auth_request_id")
	var login *http.Cookie
	for _, c := range w.Result().Cookies() {
		if strings.HasPrefix(c.Name, "__Host-palmgate_login_") {
			login = c
		}
	}
	if login == nil {
		t.Fatal("the consent redirect set no login cookie")
	}
	page := e.do(t, req{method: http.MethodGet, target: loc.RequestURI(), cookies: []*http.Cookie{sess, login}})
	wantPage(t, page, http.StatusOK, "Example App")
	if page.Header().Get("X-Frame-Options") != "DENY" || !strings.Contains(page.Header().Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("consent page headers %v: want never framed", page.Header())
	}
	// The form's answer is a redirect to the client, whose callback may redirect
	// on to any origin: no form-action, which Chromium would hold those to.
	wantCSP(t, page, "default-src 'none'; style-src 'nonce-{nonce}'; base-uri 'none'; frame-ancestors 'none'")
	// The login page of a request the session answers has no scan: 400, not 500.
	// (A browser gets the error page, an API caller the OAuth JSON.)
	for _, accept := range []string{"text/html", "application/json"} {
		w := e.do(t, req{method: http.MethodGet, target: "/oauth2/verify?auth_request_id=" + reqID, header: http.Header{"Accept": {accept}}, cookies: []*http.Cookie{sess, login}})
		if accept == "text/html" {
			wantPage(t, w, http.StatusBadRequest, "invalid_request")
			continue
		}
		wantOAuthError(t, w, http.StatusBadRequest, "invalid_request")
	}
	m := consentTokenRE.FindStringSubmatch(page.Body.String())
	if m == nil {
		t.Fatalf("consent page without its token:\n%s", page.Body)
	}
	token := html.UnescapeString(m[1])
	// Another browser (no login cookie) sees the page without a form.
	other := e.do(t, req{method: http.MethodGet, target: loc.RequestURI(), cookies: []*http.Cookie{sess}})
	if other.Code != http.StatusForbidden || consentTokenRE.MatchString(other.Body.String()) {
		t.Errorf("consent page in another browser: status %d, token shown %v; want 403 without a form", other.Code, consentTokenRE.MatchString(other.Body.String()))
	}
	wantCSP(t, other, "default-src 'none'; style-src 'nonce-{nonce}'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'") // no form to the client: form-action stays

	post := func(form url.Values, contentType string, cookies ...*http.Cookie) *httpRecorder {
		return e.do(t, req{method: http.MethodPost, target: "/oauth2/consent", body: form.Encode(), contentType: contentType, cookies: cookies})
	}
	form := url.Values{"auth_request_id": {reqID}, "decision": {"allow"}}
	for _, tc := range []struct {
		name        string
		form        url.Values
		contentType string
		cookies     []*http.Cookie
		status      int
		title       string // the error page's plain words (issue 22)
	}{
		{"no csrf token", form, "application/x-www-form-urlencoded", []*http.Cookie{sess, login}, http.StatusForbidden, "This form is not valid"},
		{"wrong csrf token", with(form, "csrf_token", strings.Repeat("A", 43)), "application/x-www-form-urlencoded", []*http.Cookie{sess, login}, http.StatusForbidden, "This form is not valid"},
		{"no login cookie", with(form, "csrf_token", token), "application/x-www-form-urlencoded", []*http.Cookie{sess}, http.StatusForbidden, "Started in another browser"},
		{"not a form", with(form, "csrf_token", token), "application/json", []*http.Cookie{sess, login}, http.StatusBadRequest, "This request is not valid"},
		{"unknown request", with(with(form, "csrf_token", token), "auth_request_id", "nope"), "application/x-www-form-urlencoded", []*http.Cookie{sess, login}, http.StatusBadRequest, "This sign-in has expired"},
	} {
		w := post(tc.form, tc.contentType, tc.cookies...)
		if w.Code != tc.status || w.Header().Get("Location") != "" || !strings.Contains(w.Header().Get("Content-Type"), "text/html") {
			t.Errorf("%s: status %d Location %q type %q, want a %d page and no redirect", tc.name, w.Code, w.Header().Get("Location"), w.Header().Get("Content-Type"), tc.status)
		}
		if body := w.Body.String(); !strings.Contains(body, tc.title) || !strings.Contains(body, `id="tech"`) {
			t.Errorf("%s: the page does not say %q in plain words, with the code in small print:\n%s", tc.name, tc.title, body)
		}
	}
	w = post(with(form, "csrf_token", token), "application/x-www-form-urlencoded", sess, login)
	wantStatus(t, w, http.StatusFound)
	if loc, _ := url.Parse(w.Header().Get("Location")); loc.Query().Get("code") == "" || loc.Query().Get("state") != "st-123" {
		t.Errorf("consent: Location %q, want the code and the state", loc)
	}

	// Logout clears the cookie (Secure, so a browser accepts the __Host- clear).
	w = e.do(t, req{method: http.MethodGet, target: "/oauth2/logout", cookies: []*http.Cookie{sess}})
	wantStatus(t, w, http.StatusOK)
	if c := cookieNamed(w, "__Host-palmgate_session"); c == nil || c.MaxAge >= 0 || !c.Secure || c.Path != "/" {
		t.Errorf("logout: Set-Cookie %q, want the session cookie cleared with Secure and Path=/", w.Header()["Set-Cookie"])
	}
	q.Set("prompt", "none")
	w = e.do(t, req{method: http.MethodGet, target: "/oauth2/authorize?" + q.Encode(), cookies: []*http.Cookie{sess}})
	if loc, _ := url.Parse(w.Header().Get("Location")); loc.Query().Get("error") != "login_required" {
		t.Errorf("after logout: Location %q, want error=login_required", loc)
	}
}

type httpRecorder = recorder

// with is form with name set to value (a copy).
func with(form url.Values, name, value string) url.Values {
	c := url.Values{}
	for k, v := range form {
		c[k] = append([]string(nil), v...)
	}
	c.Set(name, value)
	return c
}

// TestLogoutEndsTheSessionsLogins: a logout with the hint of the login that
// started an SSO session, sent by a server without the browser's cookie (an
// oauth2-proxy backend logout), ends the session and the login the session made
// silently: its refresh token is refused, prompt=none asks for a scan, and
// the page says every sign-in ended.
func TestLogoutEndsTheSessionsLogins(t *testing.T) {
	e := newEnv(t, withSSO(12*time.Hour))
	exchange := func(code string) map[string]any {
		t.Helper()
		w := e.postForm(t, "/oauth2/token", codeForm(code), nil)
		wantStatus(t, w, http.StatusOK)
		return decode(t, w)
	}
	l := e.authorize(t, authorizeQuery())
	id, nonce := e.challenge(t, l)
	e.devScan(t, id, nonce, "alice")
	w := e.do(t, req{method: http.MethodGet, target: "/oauth2/verify?auth_request_id=" + l.id, cookies: []*http.Cookie{l.cookie}})
	wantStatus(t, w, http.StatusFound)
	sess := cookieNamed(w, "__Host-palmgate_session")
	loc, _ := url.Parse(w.Header().Get("Location"))
	first := exchange(loc.Query().Get("code"))
	q := authorizeQuery()
	q.Set("prompt", "none")
	w = e.do(t, req{method: http.MethodGet, target: "/oauth2/authorize?" + q.Encode(), cookies: []*http.Cookie{sess}})
	loc, _ = url.Parse(w.Header().Get("Location"))
	second := exchange(loc.Query().Get("code"))

	w = e.postForm(t, "/oauth2/logout", url.Values{"id_token_hint": {first["id_token"].(string)}}, nil)
	wantPage(t, w, http.StatusOK, "Your sign-ins to the applications you signed in to with palmgate here have ended")
	refresh := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {second["refresh_token"].(string)},
		"client_id": {testClientID}, "client_secret": {testSecret}}
	wantOAuthError(t, e.postForm(t, "/oauth2/token", refresh, nil), http.StatusBadRequest, "invalid_grant")
	w = e.do(t, req{method: http.MethodGet, target: "/oauth2/authorize?" + q.Encode(), cookies: []*http.Cookie{sess}})
	if loc, _ := url.Parse(w.Header().Get("Location")); loc.Query().Get("error") != "login_required" {
		t.Errorf("after the logout: Location %q, want error=login_required", loc)
	}
}
