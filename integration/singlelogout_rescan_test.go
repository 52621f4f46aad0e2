package integration

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/internal/testserver"
)

// TestSingleLogoutAfterANewScanPostgres (2026-11-27), on PostgreSQL: alice
// signs in to c with a palm scan, then scans again in the same browser
// (prompt=login: a new session, the old one ended); her session answers a
// code she has not redeemed yet. A backend logout with the second login's
// hint ends the first login too (the new session kept it), and the code
// redeemed after it is invalid_grant. Failed on the binary before: the first
// login's refresh token still worked, and the code answered tokens.
func TestSingleLogoutAfterANewScanPostgres(t *testing.T) {
	t.Parallel()
	c := newOIDCClient("slo-rescan", "")
	port, issuer, cf := sharedCaddyfile(t, []oidcClient{c}, "sso_session 1h")
	e := start(t, testserver.Options{Port: port, Caddyfile: cf})
	alice := e.subject("alice")

	br := newSSOBrowser(e)
	code1, _ := br.scanLogin(t, issuer, c, alice)
	tok1 := e.exchange(t, c, code1, "")
	code2, _ := br.scanLogin(t, issuer, c, alice, "prompt", "login")
	tok2 := e.exchange(t, c, code2, "")
	inFlight, errCode := br.silent(t, issuer, c, "prompt", "none")
	if inFlight == "" {
		t.Fatalf("prompt=none in the new session: %q, want a code", errCode)
	}

	e.do(t, "GET", "/oauth2/logout?"+url.Values{"id_token_hint": {str(tok2["id_token"])}}.Encode(), nil).ExpectStatus(t, http.StatusOK)

	if r := e.refresh(t, c, str(tok1["refresh_token"])); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "invalid_grant") {
		t.Errorf("the login before the new scan, refresh after the logout: %d %s; want 400 invalid_grant", r.Status, r.Body)
	}
	if r := e.refresh(t, c, str(tok2["refresh_token"])); r.Status != http.StatusBadRequest {
		t.Errorf("the hint's login, refresh after the logout: %d %s; want 400", r.Status, r.Body)
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {inFlight}, "redirect_uri": {c.redirects[0]},
		"client_id": {c.id}, "client_secret": {c.secret}}
	if r := e.postToken(t, form); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "invalid_grant") {
		t.Errorf("a code of the session redeemed after the logout: %d %s; want 400 invalid_grant", r.Status, r.Body)
	}
}
