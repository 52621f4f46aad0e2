package integration

import (
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
)

// TestUpgradeSideBySide: an old instance (oldCaddy) and this build
// on one PostgreSQL database behind one issuer, as during a rolling restart: what
// each writes, the other serves, and the old one never answers 500.
func TestUpgradeSideBySide(t *testing.T) {
	t.Parallel()
	old := oldCaddy(t)
	a, b := newOIDCClient("sbs-a", ""), newOIDCClient("sbs-b", "")
	portA, issuer, cf := sharedCaddyfile(t, []oidcClient{a, b}, "sso_session 12h", "registration open")
	oldE := start(t, testserver.Options{Port: portA, Caddyfile: cf, Binary: old})
	newE := start(t, testserver.Options{Caddyfile: cf})
	newE.secrets = oldE.secrets
	alice, bob := oldE.subject("alice"), oldE.subject("bob")

	// Tokens issued by each are refreshed and used at the other.
	for _, pair := range [][2]*env{{oldE, newE}, {newE, oldE}} {
		from, to := pair[0], pair[1]
		tok := from.redeem(t, a, freshLoginAt(t, from, issuer, a, alice))
		to.expectUserinfo(t, tok.access, tok.sub)
		r := to.postToken(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.refresh}}, "Authorization", basicAuth(a.id, a.secret))
		if r.Status != http.StatusOK {
			t.Errorf("refresh at %s of a token of %s: %d %s", to.URL, from.URL, r.Status, r.Body)
		}
	}
	// An SSO session and a consent at the new one, honoured at the old one.
	atNew := newSSOBrowser(newE)
	w, id := atNew.classify(t, issuer, atNew.authorize(t, a))
	if w != toScan {
		t.Fatal("not sent to the login page")
	}
	var page loginPage
	atNew.do(t, "GET", "/oauth2/verify?auth_request_id="+id, nil, "Accept", "application/json").ExpectStatus(t, http.StatusOK).Decode(t, &page)
	newE.scan(t, page, bob)
	atNew.do(t, "GET", "/oauth2/verify?auth_request_id="+id, nil)
	w, id = atNew.classify(t, issuer, atNew.authorize(t, b))
	if w != toConsent {
		t.Fatal("second client: not sent to the consent page")
	}
	reqID, token := atNew.consentForm(t, id)
	if resp := atNew.consent(t, reqID, token, "allow"); resp.Status != http.StatusFound {
		t.Fatalf("consent at the new one: status %d", resp.Status)
	}
	atOld := atNew.at(oldE)
	if code, errCode := atOld.silent(t, issuer, a, "prompt", "none"); code == "" {
		t.Errorf("old instance, prompt=none in the new one's session: %q", errCode)
	}
	if code, errCode := atOld.silent(t, issuer, b, "prompt", "none"); code == "" {
		t.Errorf("old instance, prompt=none after consent at the new one: %q", errCode)
	}
	// A client registered at the new one for the code grant alone, with
	// client_secret_post, used at the old one, then at the new one: it keeps its
	// registered grants and method.
	dcr := newE.registeredClient(t, map[string]any{"client_name": "SBS", "redirect_uris": []string{"https://sbs.example/cb"},
		"token_endpoint_auth_method": "client_secret_post", "grant_types": []string{"authorization_code"}})
	code := freshLoginAt(t, oldE, issuer, dcr, alice, "scope", "openid")
	r := oldE.postToken(t, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {dcr.redirects[0]},
		"client_id": {dcr.id}, "client_secret": {dcr.secret}})
	t.Logf("code of the code-only client at the old instance: %d", r.Status)
	code = freshLoginAt(t, newE, issuer, dcr, alice, "scope", "openid")
	r = newE.postToken(t, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {dcr.redirects[0]}},
		"Authorization", basicAuth(dcr.id, dcr.secret))
	if r.Status != http.StatusUnauthorized {
		t.Errorf("the client_secret_post client with client_secret_basic at the new instance after a use at the old one: %d %s, want 401 invalid_client", r.Status, r.Body)
	}
	// An agent registered at the old one (the issuer's port: the register
	// helper checks the URLs) is found at the new one.
	ag1 := newAgent(t, "sbs-agent-1")
	oldE.register(t, ag1, alice)
	if l := newE.lookupDevice(t, ag1.deviceID); !l.Registered {
		t.Errorf("the old one's agent at the new one: %+v", l)
	}
	// A key rotation at the new one: the old one verifies its tokens.
	rotateKeys(t, newE)
	tok := newE.redeem(t, a, freshLoginAt(t, newE, issuer, a, alice, "scope", "openid"))
	eventually(t, 5*time.Second, func() string {
		if r := oldE.userinfo(t, tok.access); r.Status != http.StatusOK {
			return fmt.Sprintf("userinfo at the old one of a token signed by the new key: %d %s", r.Status, r.Body)
		}
		return ""
	})
	// The old one's backup of what both wrote restores with the new one.
	file := filepath.Join(t.TempDir(), "sbs.backup")
	if out, err := oldE.RunCommand(t, "palmgate", "backup", "--to", file, "--address", oldE.AdminAddr); err != nil {
		t.Errorf("backup at the old one: %v\n%s", err, out)
	} else if out, err := newE.RunCommand(t, "palmgate", "restore", "--from", file, "--storage", "badger", filepath.Join(t.TempDir(), "r", "palmgate")); err != nil {
		t.Errorf("restore with the new one: %v\n%s", err, out)
	}
	// The old one restarts (a crash, a config change) on the database the new one
	// migrated, and lists the clients the new one registered.
	oldE.Restart(t)
	testserver.Do(t, "GET", "http://"+oldE.AdminAddr+"/palmgate/clients", nil).ExpectStatus(t, http.StatusOK)
	if l := oldE.lookupDevice(t, ag1.deviceID); !l.Registered {
		t.Errorf("the agent at the restarted old one: %+v", l)
	}
	for _, e := range []*env{oldE, newE} {
		if r := e.do(t, "GET", "/health/ready", nil); r.Status != http.StatusOK {
			t.Errorf("%s ready: %d %s", e.URL, r.Status, r.Body)
		}
		for _, line := range strings.Split(e.Log(), "\n") {
			if strings.Contains(line, `"level":"error"`) {
				t.Errorf("%s logged an error: %s", e.URL, line)
			}
		}
	}
}
