package edge_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

var cancelTokenRE = regexp.MustCompile(`<form method="post" action="/oauth2/verify/cancel" id="cancel-form"[^>]*>.*?name="csrf_token" value="([^"]+)"`)

// cancelToken opens the login page of l as its browser and returns the Cancel
// form's CSRF token.
func (e *testEnv) cancelToken(t *testing.T, l login) string {
	t.Helper()
	w := e.do(t, req{method: http.MethodGet, target: "/oauth2/verify?auth_request_id=" + l.id, cookies: []*http.Cookie{l.cookie}})
	wantPage(t, w, http.StatusOK, `id="cancel"`)
	// The Cancel's answer redirects to the client, whose callback may redirect on
	// to any origin: no form-action, which Chromium would hold those redirects to.
	wantCSP(t, w, "default-src 'none'; img-src data:; style-src 'nonce-{nonce}'; script-src 'nonce-{nonce}'; connect-src 'self'; base-uri 'none'; frame-ancestors 'none'")
	m := cancelTokenRE.FindStringSubmatch(w.Body.String())
	if m == nil {
		t.Fatalf("the login page has no Cancel form with a token:\n%s", w.Body)
	}
	return html.UnescapeString(m[1])
}

func (e *testEnv) postCancel(t *testing.T, form url.Values, cookies ...*http.Cookie) *recorder {
	t.Helper()
	return e.do(t, req{method: http.MethodPost, target: "/oauth2/verify/cancel", body: form.Encode(),
		contentType: "application/x-www-form-urlencoded", cookies: cookies})
}

// loginStatus is the status of l's palm challenge as its page's JSON shows it.
func (e *testEnv) loginStatus(t *testing.T, l login) string {
	t.Helper()
	w := e.getJSON(t, "/oauth2/verify?auth_request_id="+l.id, l.cookie)
	wantStatus(t, w, http.StatusOK)
	s, _ := decode(t, w)["status"].(string)
	return s
}

// TestLoginCancel: the login page's Cancel denies the palm challenge and sends
// the browser back to the registered redirect_uri with error=access_denied, the
// state and iss (RFC 9207); the login is then over. A Cancel without the form's
// token, with another login's token, or from a browser without the login cookie
// is refused with a 403 page and changes nothing.
func TestLoginCancel(t *testing.T) {
	e := newEnv(t)
	l := e.authorize(t, authorizeQuery())
	token := e.cancelToken(t, l)
	other := e.authorize(t, authorizeQuery())
	otherToken := e.cancelToken(t, other)

	for _, tc := range []struct {
		name    string
		form    url.Values
		cookies []*http.Cookie
		status  int
	}{
		{"no token", url.Values{"auth_request_id": {l.id}}, []*http.Cookie{l.cookie}, http.StatusForbidden},
		{"wrong token", url.Values{"auth_request_id": {l.id}, "csrf_token": {alteredToken(token)}}, []*http.Cookie{l.cookie}, http.StatusForbidden},
		{"another login's token", url.Values{"auth_request_id": {l.id}, "csrf_token": {otherToken}}, []*http.Cookie{l.cookie}, http.StatusForbidden},
		{"no login cookie", url.Values{"auth_request_id": {l.id}, "csrf_token": {token}}, nil, http.StatusForbidden},
		{"another login's cookie", url.Values{"auth_request_id": {l.id}, "csrf_token": {token}}, []*http.Cookie{other.cookie}, http.StatusForbidden},
		{"unknown request", url.Values{"auth_request_id": {"00000000-0000-4000-8000-000000000000"}, "csrf_token": {token}}, []*http.Cookie{l.cookie}, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := e.postCancel(t, tc.form, tc.cookies...)
			wantPage(t, w, tc.status, "Nothing was changed")
			if w.Header().Get("Location") != "" {
				t.Errorf("a refused Cancel redirected to %q", w.Header().Get("Location"))
			}
			if s := e.loginStatus(t, l); s != "pending" {
				t.Errorf("after a refused Cancel the challenge is %q, want pending", s)
			}
		})
	}
	// Without the form's Content-Type: a 4xx page, never a 500.
	w := e.do(t, req{method: http.MethodPost, target: "/oauth2/verify/cancel", body: `{}`, contentType: "application/json", cookies: []*http.Cookie{l.cookie}})
	wantPage(t, w, http.StatusBadRequest, "Nothing was changed")

	w = e.postCancel(t, url.Values{"auth_request_id": {l.id}, "csrf_token": {token}}, l.cookie)
	wantStatus(t, w, http.StatusFound)
	loc, err := url.Parse(w.Header().Get("Location"))
	if err != nil || !strings.HasPrefix(loc.String(), testRedirect+"?") {
		t.Fatalf("Cancel: Location %q, want the registered redirect_uri", w.Header().Get("Location"))
	}
	q := loc.Query()
	if q.Get("error") != "access_denied" || q.Get("state") != "st-123" || q.Get("iss") != e.oidc.Issuer() || q.Get("code") != "" {
		t.Errorf("Cancel: Location %q, want error=access_denied, state=st-123, iss=%s and no code", loc, e.oidc.Issuer())
	}
	if c := cookieNamed(w, l.cookie.Name); c == nil || c.MaxAge >= 0 {
		t.Errorf("Cancel did not clear the login cookie: %v", w.Header()["Set-Cookie"])
	}
	// The login is over: its page, a second Cancel and the palm app all see it ended.
	wantOAuthError(t, e.getJSON(t, "/oauth2/verify?auth_request_id="+l.id, l.cookie), http.StatusBadRequest, "invalid_request")
	wantPage(t, e.postCancel(t, url.Values{"auth_request_id": {l.id}, "csrf_token": {token}}, l.cookie), http.StatusBadRequest, "already answered")
	// The other login is untouched.
	if s := e.loginStatus(t, other); s != "pending" {
		t.Errorf("the other login is %q, want pending", s)
	}
}

// TestLoginCancelAfterScan: a Cancel that arrives after the palm scan verified
// the challenge answers as the scan ended it (the code), since the person's scan
// came first; nothing is denied after the fact.
func TestLoginCancelAfterScan(t *testing.T) {
	e := newEnv(t)
	l := e.authorize(t, authorizeQuery())
	token := e.cancelToken(t, l)
	id, nonce := e.challenge(t, l)
	e.devScan(t, id, nonce, "alice")
	w := e.postCancel(t, url.Values{"auth_request_id": {l.id}, "csrf_token": {token}}, l.cookie)
	wantStatus(t, w, http.StatusFound)
	loc, _ := url.Parse(w.Header().Get("Location"))
	if loc.Query().Get("code") == "" || loc.Query().Get("state") != "st-123" {
		t.Errorf("Cancel after the scan: Location %q, want the code and the state", loc)
	}
}

var declineFormRE = regexp.MustCompile(`<form method="post" action="(/v1/agent/register/[^"]+/decline)" id="cancel-form"[^>]*>.*?name="csrf_token" value="([^"]+)"`)

// TestRegisterDecline: the registration page's "This is not my agent" ends the
// session denied: the palm challenge is denied, the agent's status poll sees
// failed (the spec's status of a declined session) and the page says it was
// declined. Without the page's cookie or its token the form is refused (403)
// and the session stays pending.
func TestRegisterDecline(t *testing.T) {
	e := newEnv(t)
	a := newAgent("decline-agent")
	w := e.postJSON(t, "/v1/agent/register/init", a.registration(e.clock.Now()))
	wantStatus(t, w, http.StatusCreated)
	sessionID, _ := decode(t, w)["sessionId"].(string)
	page := "/v1/agent/register/" + sessionID + "/verify"
	w = e.get(t, page)
	wantPage(t, w, http.StatusOK, "This is not my agent")
	m := declineFormRE.FindStringSubmatch(w.Body.String())
	if m == nil {
		t.Fatalf("the registration page has no decline form:\n%s", w.Body)
	}
	action, token := html.UnescapeString(m[1]), html.UnescapeString(m[2])
	cookie := cookieNamed(w, "__Secure-palmgate_register_"+sessionID[:12])
	if cookie == nil || !cookie.HttpOnly || !cookie.Secure || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/v1/agent/register/"+sessionID+"/" {
		t.Fatalf("registration page cookie = %+v, want __Secure-, HttpOnly, Secure, SameSite=Strict, the session's own path", cookie)
	}
	status := func() string {
		t.Helper()
		w := e.get(t, "/v1/agent/register/"+sessionID+"/status")
		wantStatus(t, w, http.StatusOK)
		s, _ := decode(t, w)["status"].(string)
		return s
	}
	post := func(form url.Values, cookies ...*http.Cookie) *recorder {
		return e.do(t, req{method: http.MethodPost, target: action, body: form.Encode(), contentType: "application/x-www-form-urlencoded", cookies: cookies})
	}
	for _, tc := range []struct {
		name    string
		form    url.Values
		cookies []*http.Cookie
	}{
		{"no token", url.Values{}, []*http.Cookie{cookie}},
		{"wrong token", url.Values{"csrf_token": {alteredToken(token)}}, []*http.Cookie{cookie}},
		{"no cookie", url.Values{"csrf_token": {token}}, nil},
		{"another browser's cookie", url.Values{"csrf_token": {token}}, []*http.Cookie{{Name: cookie.Name, Value: strings.Repeat("A", 43)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantPage(t, post(tc.form, tc.cookies...), http.StatusForbidden, "Nothing was changed")
			if s := status(); s != "pending" {
				t.Errorf("after a refused decline the session is %q, want pending", s)
			}
		})
	}
	wantPage(t, e.do(t, req{method: http.MethodPost, target: "/v1/agent/register/00000000-0000-4000-8000-000000000000/decline",
		body: "csrf_token=" + token, contentType: "application/x-www-form-urlencoded", cookies: []*http.Cookie{cookie}}), http.StatusNotFound, "Nothing was changed")

	w = post(url.Values{"csrf_token": {token}}, cookie)
	wantStatus(t, w, http.StatusSeeOther)
	if loc := w.Header().Get("Location"); loc != testIssuer+page {
		t.Errorf("decline: Location %q, want the registration page", loc)
	}
	if s := status(); s != "failed" {
		t.Errorf("after the decline the agent's status poll sees %q, want failed", s)
	}
	w = e.getJSON(t, page)
	wantStatus(t, w, http.StatusOK)
	if s := decode(t, w)["status"]; s != "denied" {
		t.Errorf("the registration's palm challenge is %v, want denied", s)
	}
	w = e.get(t, page)
	wantPage(t, w, http.StatusOK, "it was declined")
	if strings.Contains(w.Body.String(), "This is not my agent") {
		t.Error("the closed registration page still offers the decline form")
	}
}

// alteredToken is token with its first character changed: a wrong token of the same
// shape ("x" + token[1:] is the token itself when it starts with x).
func alteredToken(token string) string {
	first := byte('x')
	if token[0] == first {
		first = 'y'
	}
	return string(first) + token[1:]
}
