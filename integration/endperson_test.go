package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
)

// loginsAudited is the humanIds of the "login completed" audit entries in e's log
// (the default log holds them), in order, once there are n: what an operator reads
// to learn whom to end.
func loginsAudited(t *testing.T, e *env, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var ids []string
		for _, line := range strings.Split(e.Log(), "\n") {
			if !strings.Contains(line, `"login completed"`) {
				continue
			}
			var en map[string]any
			if json.Unmarshal([]byte(line[strings.Index(line, "{"):]), &en) == nil && en["logger"] == "palmgate.audit" {
				ids = append(ids, str(en["humanId"]))
			}
		}
		if len(ids) >= n || time.Now().After(deadline) {
			if len(ids) < n {
				t.Fatalf("%d login completed audit entries, want %d", len(ids), n)
			}
			return ids
		}
		time.Sleep(20 * time.Millisecond) // the log is read from the process's pipe
	}
}

// TestEndPersonAcrossInstancesPostgres (fourth review): two instances on one
// PostgreSQL database. The operator ends one person at instance A (the admin API,
// then the CLI with --revoke-grants); at instance B their SSO cookie gets
// login_required for prompt=none at once, and once the grants are revoked their
// refresh token invalid_grant at once and their access token 401 within the
// revocation bound; their agents page session is gone at B too; another
// person's sessions and tokens still work.
func TestEndPersonAcrossInstancesPostgres(t *testing.T) {
	t.Parallel()
	c := newOIDCClient("end-person", "")
	portA, issuer, cf := sharedCaddyfile(t, []oidcClient{c}, "sso_session 1h")
	ea, eb := start(t, testserver.Options{Port: portA, Caddyfile: cf}), start(t, testserver.Options{Caddyfile: cf})

	alice, bob := newSSOBrowser(ea), newSSOBrowser(ea)
	aliceSubject, bobSubject := ea.subject("alice"), ea.subject("bob")
	aliceCode, _ := alice.scanLogin(t, issuer, c, aliceSubject)
	aliceID := loginsAudited(t, ea, 1)[0]
	bobCode, _ := bob.scanLogin(t, issuer, c, bobSubject)
	if ids := loginsAudited(t, ea, 2); ids[1] == aliceID {
		t.Fatalf("alice and bob have one humanId %s", aliceID)
	}
	aliceTok, bobTok := ea.redeem(t, c, aliceCode), ea.redeem(t, c, bobCode)
	aliceAtB, bobAtB := alice.at(eb), bob.at(eb)
	// A relying party's desk knows only the pairwise sub: the operator finds the person.
	if out, err := eb.RunCommand(t, "palmgate", "human", "find", "--client-id", c.id, "--sub", aliceTok.sub, "--address", eb.AdminAddr); err != nil || strings.TrimSpace(out) != aliceID {
		t.Errorf("human find by alice's sub: %v %q; want %s", err, out, aliceID)
	}
	testserver.Do(t, "GET", "http://"+ea.AdminAddr+"/palmgate/humans?client_id="+c.id+"&sub=nobody", nil).ExpectStatus(t, http.StatusNotFound)
	silentAtB := func(b *browser) string {
		t.Helper()
		code, errCode := b.silent(t, issuer, c, "prompt", "none")
		if code != "" {
			return "code"
		}
		return errCode
	}
	if got := silentAtB(aliceAtB); got != "code" {
		t.Fatalf("instance B, prompt=none in alice's session before the end: %q, want a code", got)
	}

	alicePage, bobPage := ea.openOwnerPage(t, aliceSubject), ea.openOwnerPage(t, bobSubject)
	pageStatusAtB := func(p *ownerPage) string {
		t.Helper()
		var j struct {
			Status string `json:"status"`
		}
		r := (&ownerPage{e: eb, browser: p.browser}).get(t, "application/json")
		if r.Status == http.StatusNotFound { // owner_session_not_found: the cookie names no session
			return "ended"
		}
		r.ExpectStatus(t, http.StatusOK).Decode(t, &j)
		return j.Status
	}

	// Sessions only: her SSO and agents page sessions end on B at once, her
	// tokens live on.
	var ended struct {
		HumanID       string `json:"humanId"`
		SSOSessions   int    `json:"ssoSessions"`
		AgentsPage    int    `json:"agentsPageSessions"`
		GrantsRevoked bool   `json:"grantsRevoked"`
		Grants        int    `json:"grants"`
	}
	testserver.Do(t, "DELETE", "http://"+ea.AdminAddr+"/palmgate/humans/"+aliceID+"/sessions", nil).
		ExpectStatus(t, http.StatusOK).Decode(t, &ended)
	if ended.HumanID != aliceID || ended.SSOSessions != 1 || ended.AgentsPage != 1 || ended.GrantsRevoked {
		t.Errorf("answer %+v; want alice's (%s) one SSO session ended, no grant revoked", ended, aliceID)
	}
	if got := silentAtB(aliceAtB); got != "login_required" {
		t.Errorf("instance B, alice's cookie after the end at A: %q, want login_required", got)
	}
	if got := silentAtB(bobAtB); got != "code" {
		t.Errorf("instance B, bob's session after alice's end: %q, want a code", got)
	}
	if got := pageStatusAtB(alicePage); got == "verified" {
		t.Errorf("alice's agents page at B after the end at A: %q, want a new palm step", got)
	}
	if got := pageStatusAtB(bobPage); got != "verified" {
		t.Errorf("bob's agents page at B after alice's end: %q, want verified", got)
	}
	if msg := activeAt(t, eb, c, aliceTok.access); msg != "" {
		t.Errorf("alice's access token at B after a sessions-only end: %s; want it still good", msg)
	}

	// With --revoke-grants (the CLI, at A): her refresh token is refused at B at
	// once, her access token within the revocation bound.
	out, err := ea.RunCommand(t, "palmgate", "human", "end-sessions", aliceID, "--revoke-grants", "--address", ea.AdminAddr, "--json")
	if err != nil {
		t.Fatalf("caddy palmgate human end-sessions: %v\n%s", err, out)
	}
	if err := json.Unmarshal([]byte(out), &ended); err != nil || ended.Grants != 1 || !ended.GrantsRevoked {
		t.Errorf("CLI answer %s (%v); want alice's one grant revoked", out, err)
	}
	expectOAuthError(t, eb.postToken(t, refreshForm(c, aliceTok.refresh)), http.StatusBadRequest, "invalid_grant")
	since := time.Now()
	waitFor(t, "alice's access token refused at B", revocationBound+observeSlack, since, func() string {
		return refusedAt(t, eb, c, aliceTok.access)
	})
	if r := eb.userinfo(t, aliceTok.access); r.Status != http.StatusUnauthorized {
		t.Errorf("userinfo at B with alice's access token: %d, want 401", r.Status)
	}
	// Bob is untouched.
	if msg := activeAt(t, eb, c, bobTok.access); msg != "" {
		t.Errorf("bob's access token at B: %s", msg)
	}
	if r := eb.postToken(t, refreshForm(c, bobTok.refresh)); r.Status != http.StatusOK {
		t.Errorf("bob's refresh at B: %d %s", r.Status, r.Body)
	}
	if got := silentAtB(bobAtB); got != "code" {
		t.Errorf("instance B, bob's session after alice's grants were revoked: %q, want a code", got)
	}
	// The table form, and zeros for a person with nothing left.
	out, err = eb.RunCommand(t, "palmgate", "human", "end-sessions", aliceID, "--address", eb.AdminAddr)
	if err != nil || !strings.Contains(out, "single sign-on sessions  0") {
		t.Errorf("CLI table for a person with nothing left: %v\n%s", err, out)
	}
	testserver.Do(t, "DELETE", "http://"+ea.AdminAddr+"/palmgate/humans/not-a-person/sessions", nil).ExpectStatus(t, http.StatusBadRequest)
}
