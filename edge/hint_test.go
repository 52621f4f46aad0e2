package edge_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestPromptNoneWithAnotherPersonsHint: prompt=none from a browser whose SSO
// session is alice's, with an id_token_hint of bob's, must not sign alice in:
// it goes back to the client as login_required, with the state and iss (OIDC
// Core 3.1.2.1). With alice's own hint it answers a code.
func TestPromptNoneWithAnotherPersonsHint(t *testing.T) {
	e := newEnv(t, withSSO(time.Hour))
	// alice signs in with a palm scan: her browser holds the session.
	first := e.authorize(t, authorizeQuery())
	id, nonce := e.challenge(t, first)
	e.devScan(t, id, nonce, "alice")
	w := e.do(t, req{method: http.MethodGet, target: "/oauth2/verify?auth_request_id=" + first.id, cookies: []*http.Cookie{first.cookie}})
	wantStatus(t, w, http.StatusFound)
	sess := cookieNamed(w, "__Host-palmgate_session")
	if sess == nil {
		t.Fatalf("the finished login set no session cookie: %v", w.Header()["Set-Cookie"])
	}
	loc, _ := url.Parse(w.Header().Get("Location"))
	tw := e.postForm(t, "/oauth2/token", codeForm(loc.Query().Get("code")), nil)
	wantStatus(t, tw, http.StatusOK)
	aliceHint, _ := decode(t, tw)["id_token"].(string)
	bobHint, _ := e.tokens(t, "bob")["id_token"].(string) // another browser
	if aliceHint == "" || bobHint == "" {
		t.Fatal("the token answers lack an id_token")
	}

	silent := func(hint string) url.Values {
		t.Helper()
		q := authorizeQuery()
		q.Set("prompt", "none")
		q.Set("id_token_hint", hint)
		w := e.do(t, req{method: http.MethodGet, target: "/oauth2/authorize?" + q.Encode(), cookies: []*http.Cookie{sess}})
		wantStatus(t, w, http.StatusFound)
		loc, err := url.Parse(w.Header().Get("Location"))
		if err != nil || !strings.HasPrefix(loc.String(), testRedirect+"?") {
			t.Fatalf("Location %q, want the redirect_uri", w.Header().Get("Location"))
		}
		return loc.Query()
	}
	if got := silent(bobHint); got.Get("error") != "login_required" || got.Get("code") != "" ||
		got.Get("state") != "st-123" || got.Get("iss") != testIssuer+"/oauth2" {
		t.Errorf("prompt=none with bob's hint in alice's session answered %v, want login_required with state and iss", got)
	}
	if got := silent(aliceHint); got.Get("code") == "" || got.Get("error") != "" {
		t.Errorf("prompt=none with alice's hint in her session answered %v, want a code", got)
	}
	if got := silent("not-an-id-token"); got.Get("error") != "invalid_request" || got.Get("state") != "st-123" {
		t.Errorf("prompt=none with a malformed hint answered %v, want invalid_request with the state", got)
	}
}
