package edge_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/core/agent"
)

// ownerPage opens the agents page as a fresh browser would and returns its
// cookie and the palm challenge (id, nonce) the page asks for.
func (e *testEnv) ownerPage(t *testing.T) (*http.Cookie, string, string) {
	t.Helper()
	w := e.get(t, "/v1/human/agents")
	wantPage(t, w, http.StatusOK, "Verify with your palm")
	if !strings.Contains(w.Body.String(), `id="qr"`) || !strings.Contains(w.Body.String(), "Simulate palm scan") {
		t.Errorf("the palm step lacks the QR code or the dev scan:\n%s", w.Body)
	}
	var cookie *http.Cookie
	for _, c := range w.Result().Cookies() {
		if c.Name == "__Host-palmgate_agents" {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || !cookie.Secure || cookie.SameSite != http.SameSiteLaxMode || cookie.Path != "/" {
		t.Fatalf("owner cookie = %+v, want __Host-, HttpOnly, Secure, SameSite=Lax", cookie)
	}
	w = e.getJSON(t, "/v1/human/agents", cookie)
	wantStatus(t, w, http.StatusOK)
	m := decode(t, w)
	id, _ := m["challengeId"].(string)
	nonce, _ := m["nonce"].(string)
	if m["status"] != "pending" || id == "" || nonce == "" {
		t.Fatalf("the pending page's JSON = %s", w.Body)
	}
	return cookie, id, nonce
}

// ownerSignIn is ownerPage and a palm scan as palmSubject; it returns the cookie
// and the CSRF token of the verified page.
func (e *testEnv) ownerSignIn(t *testing.T, palmSubject string) (*http.Cookie, string) {
	t.Helper()
	cookie, id, nonce := e.ownerPage(t)
	e.devScan(t, id, nonce, palmSubject)
	w := e.do(t, req{method: http.MethodGet, target: "/v1/human/agents", cookies: []*http.Cookie{cookie}})
	wantPage(t, w, http.StatusOK, "Your agents")
	// Its forms stay on palmgate: form-action 'self' (third review keeps it).
	if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "; form-action 'self'; base-uri 'none'; frame-ancestors 'none'") {
		t.Errorf("agents page CSP %q, want form-action 'self'", csp)
	}
	body := w.Body.String()
	const marker = `name="csrf" value="`
	i := strings.Index(body, marker)
	if i < 0 {
		t.Fatalf("the verified page has no CSRF field:\n%s", body)
	}
	csrf := body[i+len(marker):]
	return cookie, csrf[:strings.IndexByte(csrf, '"')]
}

func (e *testEnv) ownerPost(t *testing.T, path string, cookie *http.Cookie, form url.Values) *recorder {
	t.Helper()
	rq := req{method: http.MethodPost, target: path, body: form.Encode(), contentType: "application/x-www-form-urlencoded"}
	if cookie != nil {
		rq.cookies = []*http.Cookie{cookie}
	}
	return e.do(t, rq)
}

// TestAgentsPage: after a palm scan the page lists the person's agents, and
// only theirs; Remove takes one away (lookups and signature checks answer
// registered:false at once); a stranger's page neither lists nor removes it, a
// post without the session's CSRF token or cookie is refused, and sign-out ends
// the session on the server.
func TestAgentsPage(t *testing.T) {
	e := newEnv(t)
	mine, kept, theirs := newAgent("alice-one"), newAgent("alice-two"), newAgent("bob-one")
	e.register(t, mine, "alice")
	e.register(t, kept, "alice")
	e.register(t, theirs, "bob")

	alice, csrf := e.ownerSignIn(t, "alice")
	w := e.getJSON(t, "/v1/human/agents", alice)
	wantStatus(t, w, http.StatusOK)
	m := decode(t, w)
	agents, _ := m["agents"].([]any)
	if m["status"] != "verified" || len(agents) != 2 || !strings.Contains(w.Body.String(), "alice-one") || strings.Contains(w.Body.String(), "bob-one") {
		t.Fatalf("alice's page JSON = %s, want her two agents only", w.Body)
	}

	bob, bobCSRF := e.ownerSignIn(t, "bob")
	// Bob forges a removal of alice's agent, with his own valid session: 404.
	w = e.ownerPost(t, "/v1/human/agents/remove", bob, url.Values{"csrf": {bobCSRF}, "deviceId": {"alice-one"}})
	wantPage(t, w, http.StatusNotFound, "no agent")
	// With alice's CSRF token but his cookie: 403.
	w = e.ownerPost(t, "/v1/human/agents/remove", bob, url.Values{"csrf": {csrf}, "deviceId": {"alice-one"}})
	wantPage(t, w, http.StatusForbidden, "session")
	// Alice's own form without her cookie (a cross-site post): 403.
	w = e.ownerPost(t, "/v1/human/agents/remove", nil, url.Values{"csrf": {csrf}, "deviceId": {"alice-one"}})
	wantPage(t, w, http.StatusForbidden, "session")
	// Her cookie without the token: 403.
	w = e.ownerPost(t, "/v1/human/agents/remove", alice, url.Values{"deviceId": {"alice-one"}})
	wantPage(t, w, http.StatusForbidden, "session")
	if m := decode(t, e.get(t, "/v1/agent/verify/device/alice-one")); m["registered"] != true {
		t.Fatalf("a refused removal removed the agent: %v", m)
	}

	w = e.ownerPost(t, "/v1/human/agents/remove", alice, url.Values{"csrf": {csrf}, "deviceId": {"alice-one"}})
	wantPage(t, w, http.StatusOK, "Removed alice-one.")
	if strings.Contains(w.Body.String(), `data-device-id="alice-one"`) || !strings.Contains(w.Body.String(), `data-device-id="alice-two"`) {
		t.Errorf("the page after the removal:\n%s", w.Body)
	}
	if m := decode(t, e.get(t, "/v1/agent/verify/device/alice-one")); m["registered"] != false {
		t.Errorf("removed agent by device: %v", m)
	}
	if m := decode(t, e.get(t, "/v1/agent/verify/device/alice-two")); m["registered"] != true {
		t.Errorf("kept agent by device: %v", m)
	}
	w = e.ownerPost(t, "/v1/human/agents/remove", alice, url.Values{"csrf": {csrf}, "deviceId": {"alice-one"}})
	wantPage(t, w, http.StatusNotFound, "no agent")
	w = e.ownerPost(t, "/v1/human/agents/remove", alice, url.Values{"csrf": {csrf}, "deviceId": {"bad\x01id"}})
	wantPage(t, w, http.StatusBadRequest, "deviceId")

	// Sign-out ends the session: its cookie and token no longer work.
	w = e.ownerPost(t, "/v1/human/agents/signout", alice, url.Values{"csrf": {csrf}})
	wantPage(t, w, http.StatusOK, "signed out")
	w = e.ownerPost(t, "/v1/human/agents/remove", alice, url.Values{"csrf": {csrf}, "deviceId": {"alice-two"}})
	wantPage(t, w, http.StatusForbidden, "session")
	w = e.getJSON(t, "/v1/human/agents", alice)
	wantV1Error(t, w, http.StatusNotFound, "owner_session_not_found", "") // the page's poll would say it ended
}

// TestAgentsPagePending: before the palm scan the page lists nothing and a
// removal is refused; an expired or denied palm step lists nothing either.
func TestAgentsPagePending(t *testing.T) {
	e := newEnv(t)
	e.register(t, newAgent("pending-one"), "alice")
	cookie, id, nonce := e.ownerPage(t)
	w := e.ownerPost(t, "/v1/human/agents/remove", cookie, url.Values{"csrf": {"x"}, "deviceId": {"pending-one"}})
	wantPage(t, w, http.StatusForbidden, "session")
	w = e.postJSON(t, "/v1/palm/challenges/"+id+"/deny", map[string]string{"nonce": nonce})
	wantStatus(t, w, http.StatusOK)
	w = e.getJSON(t, "/v1/human/agents", cookie)
	if m := decode(t, w); m["status"] != "denied" || m["agents"] != nil {
		t.Errorf("a denied page's JSON = %s", w.Body)
	}
	// The page says so and clears its cookie; reloading then starts a new palm step.
	w = e.do(t, req{method: http.MethodGet, target: "/v1/human/agents", cookies: []*http.Cookie{cookie}})
	wantPage(t, w, http.StatusOK, "declined")
	if c := w.Result().Cookies(); len(c) != 1 || c[0].MaxAge >= 0 {
		t.Errorf("the declined page's cookies = %v, want the session's cleared", c)
	}
	w = e.get(t, "/v1/human/agents")
	wantPage(t, w, http.StatusOK, "Verify with your palm")
	if len(w.Result().Cookies()) == 0 {
		t.Error("a new palm step set no new cookie")
	}
	w = e.ownerPost(t, "/v1/human/agents/remove", cookie, url.Values{"csrf": {"x"}, "deviceId": {"pending-one"}})
	wantPage(t, w, http.StatusForbidden, "session")
	// A verified page ends after agent.OwnerSessionTTL: its forms are refused.
	alice, csrf := e.ownerSignIn(t, "alice")
	e.clock.Advance(agent.OwnerSessionTTL)
	w = e.ownerPost(t, "/v1/human/agents/remove", alice, url.Values{"csrf": {csrf}, "deviceId": {"pending-one"}})
	wantPage(t, w, http.StatusForbidden, "session")
	if m := decode(t, e.get(t, "/v1/agent/verify/device/pending-one")); m["registered"] != true {
		t.Errorf("an expired page removed the agent: %v", m)
	}
	// A HEAD or a JSON poll without a session starts nothing.
	w = e.do(t, req{method: http.MethodHead, target: "/v1/human/agents"})
	wantStatus(t, w, http.StatusOK)
	if len(w.Result().Cookies()) != 0 {
		t.Error("HEAD started a session")
	}
}
