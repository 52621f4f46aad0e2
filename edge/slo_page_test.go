package edge_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestLogoutPageOfAnotherPersonsHint (2026-11-27): a browser whose palmgate
// session is bob's, sent to the logout endpoint with alice's hint (a page
// holding her ID token), ends alice's session's logins and bob's session, not
// bob's sign-ins: the page must not tell bob his sign-ins to the applications
// have ended.
func TestLogoutPageOfAnotherPersonsHint(t *testing.T) {
	e := newEnv(t, withSSO(12*time.Hour))
	signIn := func(who string) (*http.Cookie, []map[string]any) {
		t.Helper()
		w := e.scanned(t, authorizeQuery(), who)
		wantStatus(t, w, http.StatusFound)
		sess := cookieNamed(w, "__Host-palmgate_session")
		var toks []map[string]any
		for i := 0; i < 2; i++ {
			if i == 1 {
				q := authorizeQuery()
				q.Set("prompt", "none")
				w = e.do(t, req{method: http.MethodGet, target: "/oauth2/authorize?" + q.Encode(), cookies: []*http.Cookie{sess}})
			}
			loc, _ := url.Parse(w.Header().Get("Location"))
			tw := e.postForm(t, "/oauth2/token", codeForm(loc.Query().Get("code")), nil)
			wantStatus(t, tw, http.StatusOK)
			toks = append(toks, decode(t, tw))
		}
		return sess, toks
	}
	_, alice := signIn("alice")
	bobSess, bob := signIn("bob")
	w := e.do(t, req{method: http.MethodPost, target: "/oauth2/logout", contentType: "application/x-www-form-urlencoded",
		body: url.Values{"id_token_hint": {alice[0]["id_token"].(string)}}.Encode(), header: http.Header{"Accept": {"text/html"}}, cookies: []*http.Cookie{bobSess}})
	wantStatus(t, w, http.StatusOK)
	if body := w.Body.String(); strings.Contains(body, "Your sign-ins to the applications") {
		t.Errorf("bob's browser is told his sign-ins ended; they go on:\n%s", body)
	}
	refresh := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {bob[1]["refresh_token"].(string)},
		"client_id": {testClientID}, "client_secret": {testSecret}}
	wantStatus(t, e.postForm(t, "/oauth2/token", refresh, nil), http.StatusOK)
}

// TestLogoutPageSaysTheSessionEnded (2026-11-27): a logout from the browser
// whose session made the hint's login, its only one, ends that session (single
// logout drops it with its logins); the page says so, as before single logout.
func TestLogoutPageSaysTheSessionEnded(t *testing.T) {
	e := newEnv(t, withSSO(12*time.Hour))
	w := e.scanned(t, authorizeQuery(), "alice")
	wantStatus(t, w, http.StatusFound)
	sess := cookieNamed(w, "__Host-palmgate_session")
	loc, _ := url.Parse(w.Header().Get("Location"))
	tw := e.postForm(t, "/oauth2/token", codeForm(loc.Query().Get("code")), nil)
	wantStatus(t, tw, http.StatusOK)
	w = e.do(t, req{method: http.MethodPost, target: "/oauth2/logout", contentType: "application/x-www-form-urlencoded",
		body: url.Values{"id_token_hint": {decode(t, tw)["id_token"].(string)}}.Encode(), header: http.Header{"Accept": {"text/html"}}, cookies: []*http.Cookie{sess}})
	wantPage(t, w, http.StatusOK, "Your palmgate session in this browser has ended")
}
