package edge_test

import (
	"net/http"
	"net/url"
	"testing"
)

// TestLoginPageSaysWhenGone: the login page carries the words its script shows
// once the poll is refused, and the poll of a login whose records are gone
// (unknown: collected after expiry) or already answered is a 400 in the OAuth
// JSON dialect, never a 200 the script would wait on. (Third review: the page
// said "Waiting for your palm scan…" forever.)
func TestLoginPageSaysWhenGone(t *testing.T) {
	e := newEnv(t)
	l := e.authorize(t, authorizeQuery())
	w := e.do(t, req{method: http.MethodGet, target: "/oauth2/verify?auth_request_id=" + l.id, cookies: []*http.Cookie{l.cookie}})
	wantPage(t, w, http.StatusOK, `data-gone="This sign-in has expired or has already ended." data-gone-todo="Go back to the application and sign in again."`)

	wantOAuthError(t, e.getJSON(t, "/oauth2/verify?auth_request_id=00000000-0000-4000-8000-000000000000", l.cookie), http.StatusBadRequest, "invalid_request")
	token := e.cancelToken(t, l)
	wantStatus(t, e.postCancel(t, url.Values{"auth_request_id": {l.id}, "csrf_token": {token}}, l.cookie), http.StatusFound)
	wantOAuthError(t, e.getJSON(t, "/oauth2/verify?auth_request_id="+l.id, l.cookie), http.StatusBadRequest, "invalid_request")

}
