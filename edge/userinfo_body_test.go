package edge_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestUserinfoTokenInBody (fourth review): OIDC Core 5.3.1's userinfo takes POST,
// and RFC 6750 2.2 sends the token there as the form body's access_token, as the
// OpenID conformance suite's oidcc-userinfo-post-body does. It was 401 "a bearer
// access token is required". A token both in the header and in the body, or twice
// in the body, is 400 invalid_request (RFC 6750 2: one method per request), and
// a GET's query is not read.
func TestUserinfoTokenInBody(t *testing.T) {
	e := newEnv(t)
	tok := e.tokens(t, "alice")
	access := tok["access_token"].(string)
	form := func(v url.Values, h http.Header) *recorder {
		return e.do(t, req{method: http.MethodPost, target: "/oauth2/userinfo", body: v.Encode(),
			contentType: "application/x-www-form-urlencoded", header: h})
	}
	w := form(url.Values{"access_token": {access}}, nil)
	wantStatus(t, w, http.StatusOK)
	if sub, _ := decode(t, w)["sub"].(string); sub == "" {
		t.Fatalf("userinfo with the token in the body = %s, want the subject", w.Body)
	}
	wantChallenge(t, form(url.Values{"access_token": {access + "x"}}, nil), http.StatusUnauthorized, "invalid_token")
	wantChallenge(t, form(url.Values{"access_token": {tok["id_token"].(string)}}, nil), http.StatusUnauthorized, "invalid_token")
	wantChallenge(t, form(url.Values{"access_token": {access}}, bearer(access)), http.StatusBadRequest, "invalid_request")
	wantChallenge(t, form(url.Values{"access_token": {access, access}}, nil), http.StatusBadRequest, "invalid_request")
	wantChallenge(t, form(url.Values{"other": {"x"}}, nil), http.StatusUnauthorized, "")
	// Another media type is not a form: its access_token is not looked for.
	w = e.do(t, req{method: http.MethodPost, target: "/oauth2/userinfo", body: `{"access_token":"` + access + `"}`, contentType: "application/json"})
	wantChallenge(t, w, http.StatusUnauthorized, "")
	// RFC 6750 2.2: never by GET; the query is not a place for it either.
	w = e.get(t, "/oauth2/userinfo?access_token="+url.QueryEscape(access))
	wantChallenge(t, w, http.StatusUnauthorized, "")
	if strings.Contains(w.Body.String(), `"sub"`) {
		t.Fatalf("GET with the token in the query answered the subject")
	}
}
