package edge_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"
)

// wantNoStore fails unless w may not be stored by the browser or a cache: the
// answers of the authorization endpoint carry codes, errors with the client's
// state, or a login's id (RFC 6749 5.1's rule for tokens, kept here too).
func wantNoStore(t *testing.T, what string, w *httpRecorder) {
	t.Helper()
	if cc, p := w.Header().Get("Cache-Control"), w.Header().Get("Pragma"); cc != "no-store" || p != "no-cache" {
		t.Errorf("%s (status %d): Cache-Control %q, Pragma %q; want no-store and no-cache", what, w.Code, cc, p)
	}
}

// TestAuthorizeAnswersAreNotStored: every answer of /oauth2/authorize (the 302 to
// the login page, the error page, an error sent back with the state, a code from
// the SSO session by redirect or form_post) and the login page's 302 with the code
// carry Cache-Control: no-store and Pragma: no-cache.
func TestAuthorizeAnswersAreNotStored(t *testing.T) {
	e := newEnv(t, withSSO(time.Hour))
	authorize := func(q url.Values, cookies ...*http.Cookie) *httpRecorder {
		return e.do(t, req{method: http.MethodGet, target: "/oauth2/authorize?" + q.Encode(), cookies: cookies})
	}
	first := authorizeQuery()
	w := authorize(first)
	wantStatus(t, w, http.StatusFound)
	wantNoStore(t, "the 302 to the login page", w)
	l := login{id: mustLocation(t, w).Query().Get("auth_request_id"), cookie: w.Result().Cookies()[0]}
	id, nonce := e.challenge(t, l)
	e.devScan(t, id, nonce, "alice")
	w = e.do(t, req{method: http.MethodGet, target: "/oauth2/verify?auth_request_id=" + l.id, cookies: []*http.Cookie{l.cookie}})
	wantStatus(t, w, http.StatusFound)
	if mustLocation(t, w).Query().Get("code") == "" {
		t.Fatalf("the login page's 302 has no code: %q", w.Header().Get("Location"))
	}
	wantNoStore(t, "the login page's 302 with the code", w)
	sess := cookieNamed(w, "__Host-palmgate_session")
	if sess == nil {
		t.Fatal("the finished login set no session cookie")
	}

	unknown := authorizeQuery()
	unknown.Set("client_id", "nobody")
	w = authorize(unknown)
	wantStatus(t, w, http.StatusBadRequest)
	wantNoStore(t, "the error page of an unknown client", w)

	badScope := authorizeQuery()
	badScope.Set("scope", "openid admin")
	w = authorize(badScope)
	wantStatus(t, w, http.StatusFound)
	if q := mustLocation(t, w).Query(); q.Get("error") != "invalid_scope" || q.Get("state") != "st-123" {
		t.Fatalf("invalid scope: Location %q, want invalid_scope with the state", w.Header().Get("Location"))
	}
	wantNoStore(t, "an error redirect with the state", w)

	for _, mode := range []string{"query", "form_post"} {
		q := authorizeQuery()
		q.Set("prompt", "none")
		q.Set("response_mode", mode)
		w = authorize(q, sess)
		wantNoStore(t, "a code from the SSO session ("+mode+")", w)
		w = authorize(q)
		wantNoStore(t, "login_required ("+mode+")", w)
	}
}

// mustLocation is the parsed Location of w.
func mustLocation(t *testing.T, w *httpRecorder) *url.URL {
	t.Helper()
	u, err := url.Parse(w.Header().Get("Location"))
	if err != nil || w.Header().Get("Location") == "" {
		t.Fatalf("Location %q: %v", w.Header().Get("Location"), err)
	}
	return u
}
