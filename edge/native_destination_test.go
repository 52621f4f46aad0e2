package edge_test

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/oidc"
)

// TestPagesNameTheAppDestination (fourth review, a later pass; RFC 8252 8.6):
// for a redirect URI of a private-use scheme, the login page and the consent
// page name where the code goes (the scheme and authority, RedirectDestination),
// so that a person can notice an app that is not the one they use; a web
// client's pages say nothing of it.
func TestPagesNameTheAppDestination(t *testing.T) {
	e := newEnv(t, withSSO(12*time.Hour), withRegistration(oidc.RegistrationConfig{}))
	w := e.postJSON(t, "/oauth2/register", map[string]any{"redirect_uris": []string{cursorCallback}, "token_endpoint_auth_method": "none", "client_name": "Cursor"})
	wantStatus(t, w, http.StatusCreated)
	id, _ := decode(t, w)["client_id"].(string)
	q := url.Values{"response_type": {"code"}, "client_id": {id}, "redirect_uri": {cursorCallback}, "scope": {"openid"}, "state": {"st-9"},
		"code_challenge": {pkceChallenge()}, "code_challenge_method": {"S256"}}
	const want = `id="app-destination">cursor://anysphere.cursor-retrieval<`

	loginPage := func(q url.Values) string {
		t.Helper()
		l := e.authorize(t, q)
		page := e.do(t, req{method: http.MethodGet, target: "/oauth2/verify?auth_request_id=" + l.id, header: http.Header{"Accept": {browserAccept}}, cookies: []*http.Cookie{l.cookie}})
		wantPage(t, page, http.StatusOK, "Sign in with your palm")
		return page.Body.String()
	}
	if body := loginPage(q); !strings.Contains(body, want) {
		t.Errorf("the login page of a cursor:// client does not name the app:\n%s", body)
	}
	if body := loginPage(authorizeQuery()); strings.Contains(body, "app-destination") {
		t.Errorf("the login page of a web client names an app:\n%s", body)
	}

	w = e.scanned(t, q, "alice")
	wantStatus(t, w, http.StatusFound)
	sess := cookieNamed(w, "__Host-palmgate_session")
	w = e.do(t, req{method: http.MethodGet, target: "/oauth2/authorize?" + q.Encode(), cookies: []*http.Cookie{sess}})
	wantStatus(t, w, http.StatusFound)
	loc, _ := url.Parse(w.Header().Get("Location"))
	if loc.Path != "/oauth2/consent" {
		t.Fatalf("Location %q; want the consent page", loc)
	}
	page := e.do(t, req{method: http.MethodGet, target: loc.RequestURI(), header: http.Header{"Accept": {browserAccept}}, cookies: []*http.Cookie{sess, w.Result().Cookies()[0]}})
	wantPage(t, page, http.StatusOK, "Allow")
	if body := html.UnescapeString(page.Body.String()); !strings.Contains(body, want) {
		t.Errorf("the consent page of a cursor:// client does not name the app:\n%s", page.Body)
	}
}
