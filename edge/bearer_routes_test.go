package edge_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func bearer(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

// wantChallenge checks an RFC 6750 refusal: the status, a Bearer challenge with
// the realm and, when code is not "", error="code" in it and in the JSON body.
func wantChallenge(t *testing.T, w *recorder, status int, code string) {
	t.Helper()
	wantStatus(t, w, status)
	ch := w.Header().Get("WWW-Authenticate")
	if !strings.HasPrefix(ch, "Bearer ") || !strings.Contains(ch, `realm="palmgate"`) {
		t.Errorf("WWW-Authenticate = %q, want a Bearer challenge of realm palmgate", ch)
	}
	if code != "" {
		if !strings.Contains(ch, `error="`+code+`"`) {
			t.Errorf("WWW-Authenticate = %q, want error=%q", ch, code)
		}
		if m := decode(t, w); m["error"] != code {
			t.Errorf("body error = %v, want %s", m["error"], code)
		}
	}
}

// TestUserinfo: a valid access token gets its subject, by GET and by POST; no
// token, a bad token and a token without openid get RFC 6750 challenges.
func TestUserinfo(t *testing.T) {
	e := newEnv(t)
	tok := e.tokens(t, "alice")
	access := tok["access_token"].(string)
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		w := e.do(t, req{method: method, target: "/oauth2/userinfo", header: bearer(access)})
		wantStatus(t, w, http.StatusOK)
		m := decode(t, w)
		if sub, _ := m["sub"].(string); sub == "" || strings.Contains(sub, "alice") {
			t.Errorf("%s userinfo sub = %v, want the pairwise subject", method, m["sub"])
		}
		if len(m) != 1 {
			t.Errorf("userinfo = %s, want only sub", w.Body)
		}
	}

	w := e.get(t, "/oauth2/userinfo")
	wantChallenge(t, w, http.StatusUnauthorized, "")
	if strings.Contains(w.Header().Get("WWW-Authenticate"), "error=") {
		t.Errorf("a request without a token got an error in its challenge: %q (RFC 6750 3.1)", w.Header().Get("WWW-Authenticate"))
	}
	wantChallenge(t, e.do(t, req{method: http.MethodGet, target: "/oauth2/userinfo", header: bearer("not.a.token")}), http.StatusUnauthorized, "invalid_token")
	wantChallenge(t, e.do(t, req{method: http.MethodGet, target: "/oauth2/userinfo", header: bearer(tok["id_token"].(string))}), http.StatusUnauthorized, "invalid_token")
	wantChallenge(t, e.do(t, req{method: http.MethodGet, target: "/oauth2/userinfo", header: bearer(access + "x")}), http.StatusUnauthorized, "invalid_token")
}

// TestCheck: /oauth2/check (for gateways) admits a valid token with the identity
// headers, replacing client-sent copies, also under an appended path; it refuses
// a missing token with 401 and a missing scope with 403 insufficient_scope.
func TestCheck(t *testing.T) {
	e := newEnv(t)
	access := e.tokens(t, "alice")["access_token"].(string)
	for _, target := range []string{"/oauth2/check", "/oauth2/check/orders/42", "/oauth2/check?scope=openid"} {
		h := bearer(access)
		h.Set("X-Palmgate-Sub", "forged")
		w := e.do(t, req{method: http.MethodGet, target: target, header: h})
		wantStatus(t, w, http.StatusOK)
		if sub := w.Header().Get("X-Palmgate-Sub"); sub == "" || sub == "forged" {
			t.Errorf("%s: X-Palmgate-Sub = %q, want the token's subject", target, sub)
		}
		if w.Header().Get("X-Palmgate-Client-Id") != testClientID {
			t.Errorf("%s: X-Palmgate-Client-Id = %q, want %s", target, w.Header().Get("X-Palmgate-Client-Id"), testClientID)
		}
		if !strings.Contains(w.Header().Get("X-Palmgate-Scope"), "openid") {
			t.Errorf("%s: X-Palmgate-Scope = %q, want the granted scopes", target, w.Header().Get("X-Palmgate-Scope"))
		}
	}
	wantChallenge(t, e.get(t, "/oauth2/check"), http.StatusUnauthorized, "")
	w := e.do(t, req{method: http.MethodGet, target: "/oauth2/check?scope=orders", header: bearer(access)})
	wantChallenge(t, w, http.StatusForbidden, "insufficient_scope")
	if ch := w.Header().Get("WWW-Authenticate"); !strings.Contains(ch, `scope="orders"`) {
		t.Errorf("WWW-Authenticate = %q, want the missing scope", ch)
	}
	w = e.do(t, req{method: http.MethodGet, target: "/oauth2/check?scope=" + url.QueryEscape(`a"b`), header: bearer(access)})
	wantStatus(t, w, http.StatusForbidden)
	if ch := w.Header().Get("WWW-Authenticate"); strings.Contains(ch, `a"b`) {
		t.Errorf("WWW-Authenticate = %q carries a quote of the request", ch)
	}
}

// TestIntrospect: an authenticated client learns whether a token is active; an
// unauthenticated request is invalid_client.
func TestIntrospect(t *testing.T) {
	e := newEnv(t)
	tok := e.tokens(t, "alice")
	introspect := func(token string, h http.Header, form url.Values) *recorder {
		if form == nil {
			form = url.Values{"client_id": {testClientID}, "client_secret": {testSecret}}
		}
		form.Set("token", token)
		return e.postForm(t, "/oauth2/introspect", form, h)
	}
	for _, kind := range []string{"access_token", "refresh_token"} {
		w := introspect(tok[kind].(string), nil, nil)
		wantStatus(t, w, http.StatusOK)
		m := decode(t, w)
		if m["active"] != true || m["client_id"] != testClientID || m["sub"] == nil {
			t.Errorf("%s introspection = %s, want active with client_id and sub", kind, w.Body)
		}
	}
	w := introspect("garbage", basicAuth(testClientID, testSecret), url.Values{})
	wantStatus(t, w, http.StatusOK)
	if m := decode(t, w); m["active"] != false || len(m) != 1 {
		t.Errorf("introspection of garbage = %s, want only active:false", w.Body)
	}
	w = introspect(tok["access_token"].(string), basicAuth(testClientID, "wrong"), url.Values{})
	wantOAuthError(t, w, http.StatusUnauthorized, "invalid_client")
	if !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Basic ") {
		t.Errorf("WWW-Authenticate = %q, want a Basic challenge", w.Header().Get("WWW-Authenticate"))
	}
	wantOAuthError(t, introspect(tok["access_token"].(string), nil, url.Values{}), http.StatusUnauthorized, "invalid_client")
}

// TestRevoke: revoking a refresh token ends its grant (the access token stops
// working, the refresh token too); an unknown token is 200 as RFC 7009 says; an
// unauthenticated client is invalid_client.
func TestRevoke(t *testing.T) {
	e := newEnv(t)
	tok := e.tokens(t, "alice")
	revoke := func(token string, secret string) *recorder {
		return e.postForm(t, "/oauth2/revoke", url.Values{"token": {token}, "client_id": {testClientID}, "client_secret": {secret}}, nil)
	}
	wantOAuthError(t, revoke(tok["refresh_token"].(string), "wrong"), http.StatusUnauthorized, "invalid_client")
	wantStatus(t, e.do(t, req{method: http.MethodGet, target: "/oauth2/userinfo", header: bearer(tok["access_token"].(string))}), http.StatusOK)

	w := revoke(tok["refresh_token"].(string), testSecret)
	wantStatus(t, w, http.StatusOK)
	wantChallenge(t, e.do(t, req{method: http.MethodGet, target: "/oauth2/userinfo", header: bearer(tok["access_token"].(string))}), http.StatusUnauthorized, "invalid_token")
	w = e.postForm(t, "/oauth2/token", url.Values{
		"grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)},
		"client_id": {testClientID}, "client_secret": {testSecret},
	}, nil)
	wantOAuthError(t, w, http.StatusBadRequest, "invalid_grant")

	wantStatus(t, revoke("garbage", testSecret), http.StatusOK)
}

// TestLogout: a logout without a hint shows the signed-out page; with the ID
// token and a registered post_logout_redirect_uri it ends the grant and goes
// back with the state; an unregistered redirect is a 400 page, never followed.
func TestLogout(t *testing.T) {
	e := newEnv(t)
	w := e.get(t, "/oauth2/logout")
	wantPage(t, w, http.StatusOK, "You are signed out")

	w = e.do(t, req{method: http.MethodHead, target: "/oauth2/logout"})
	wantStatus(t, w, http.StatusOK)

	tok := e.tokens(t, "alice")
	bad := url.Values{"id_token_hint": {tok["id_token"].(string)}, "post_logout_redirect_uri": {"https://evil.example/"}}
	w = e.getPage(t, "/oauth2/logout?"+bad.Encode())
	wantPage(t, w, http.StatusBadRequest, "Sign-out refused")
	if w.Header().Get("Location") != "" {
		t.Errorf("an unregistered post_logout_redirect_uri was followed: %q", w.Header().Get("Location"))
	}
	wantStatus(t, e.do(t, req{method: http.MethodGet, target: "/oauth2/userinfo", header: bearer(tok["access_token"].(string))}), http.StatusOK)

	q := url.Values{"id_token_hint": {tok["id_token"].(string)}, "post_logout_redirect_uri": {testPostLogout}, "state": {"bye-1"}}
	w = e.get(t, "/oauth2/logout?"+q.Encode())
	wantStatus(t, w, http.StatusFound)
	if loc := w.Header().Get("Location"); loc != testPostLogout+"?state=bye-1" {
		t.Errorf("Location = %q, want %s?state=bye-1", loc, testPostLogout)
	}
	wantChallenge(t, e.do(t, req{method: http.MethodGet, target: "/oauth2/userinfo", header: bearer(tok["access_token"].(string))}), http.StatusUnauthorized, "invalid_token")

	w = e.getPage(t, "/oauth2/logout?id_token_hint=garbage")
	wantPage(t, w, http.StatusBadRequest, "Sign-out refused")
	wantOAuthError(t, e.get(t, "/oauth2/logout?id_token_hint=garbage"), http.StatusBadRequest, "invalid_request")
}
