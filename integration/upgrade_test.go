package integration

import (
	"cmp"
	"context"
	"fmt"
	"github.com/palmgate/palmgate/internal/tooltest"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/palmgate/palmgate/internal/pgtest"
	"github.com/palmgate/palmgate/internal/testserver"
)

// Upgrades: an older palmgate (upgradeFrom, built from the git history by
// oldCaddy; PALMGATE_UPGRADE_FROM names another revision or a built binary)
// makes every kind of state, then this build serves it: in place (the old one
// stopped, this one started on its store, Badger and PostgreSQL), and side by
// side on one PostgreSQL database, as during a rolling restart.

// upgradeFrom is the release the upgrade tests start from by default: the last
// commit of the session before this one's first (2026-11-27 00:23 UTC). Its
// go.mod is this one's, so its build reuses the build cache but for palmgate's
// own packages.
const upgradeFrom = "6638b9a"

var oldBuild struct {
	once      sync.Once
	dir, path string
	err       error
}

// oldCaddy returns the old binary: PALMGATE_UPGRADE_FROM when it names a file,
// else the revision it names (default upgradeFrom) built once per test process
// from `git archive` into a temporary directory (removeOldCaddy removes it). It
// skips the test (fails it with PALMGATE_REQUIRE_TOOLS=1) when git or the
// revision is missing (a shallow clone).
func oldCaddy(t *testing.T) string {
	t.Helper()
	from := cmp.Or(os.Getenv("PALMGATE_UPGRADE_FROM"), upgradeFrom)
	if st, err := os.Stat(from); err == nil && !st.IsDir() {
		return from
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(wd) // the module root: tests run in integration/
	if err := exec.Command("git", "-C", root, "cat-file", "-e", from+"^{commit}").Run(); err != nil {
		tooltest.Missing(t, fmt.Sprintf("the upgrade tests build palmgate %s from the git history, which this checkout lacks (git cat-file: %v); fetch it, or set PALMGATE_UPGRADE_FROM to an old caddy binary", from, err))
	}
	oldBuild.once.Do(func() {
		began := time.Now()
		if oldBuild.dir, oldBuild.err = os.MkdirTemp("", "palmgate-old-caddy-"); oldBuild.err != nil {
			return
		}
		src := filepath.Join(oldBuild.dir, "src")
		oldBuild.path = filepath.Join(oldBuild.dir, "caddy")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var out []byte
		script := `mkdir -p "$2" && git -C "$1" archive "$3" | tar -x -C "$2" && cd "$2" && go build -o "$4" ./cmd/caddy`
		out, oldBuild.err = exec.CommandContext(ctx, "sh", "-c", script, "sh", root, src, from, oldBuild.path).CombinedOutput()
		if oldBuild.err != nil {
			oldBuild.err = fmt.Errorf("building palmgate %s: %w\n%s", from, oldBuild.err, out)
		}
		_ = os.RemoveAll(src)
		t.Logf("built palmgate %s in %s", from, time.Since(began).Round(time.Second))
	})
	if oldBuild.err != nil {
		t.Fatal(oldBuild.err)
	}
	return oldBuild.path
}

// removeOldCaddy removes what oldCaddy built (TestMain).
func removeOldCaddy() error {
	if oldBuild.dir == "" {
		return nil
	}
	return os.RemoveAll(oldBuild.dir)
}

// supports reports whether binary bin accepts the global palmgate option line.
func supports(t *testing.T, bin, line string) bool {
	t.Helper()
	f := filepath.Join(t.TempDir(), "Caddyfile")
	cf := "{\n\tadmin off\n\tpalmgate {\n\t\tissuer http://127.0.0.1:1\n\t\tdev\n\t\t" + line + "\n\t}\n}\nhttp://127.0.0.1:1 {\n\tpalmgate\n}\n"
	if err := os.WriteFile(f, []byte(cf), 0o600); err != nil {
		t.Fatal(err)
	}
	return exec.Command(bin, "adapt", "--config", f, "--adapter", "caddyfile").Run() == nil
}

// upgradeState is what the old binary left.
type upgradeState struct {
	a, b, admin, dcr  oidcClient
	portal            oidcClient
	dev               *portalDev
	owner             *ownerPage
	keysListed        string   // keys list --json after the rotation
	offline           tokenSet // alice at a, openid offline_access, before the rotation
	online            tokenSet // bob at a, openid only
	adminTok, dcrTok  tokenSet
	unredeemed        string // a code of a not yet redeemed
	pendingLogin      string // an auth_request_id not yet scanned
	pendingBr         *browser
	scannedLogin      string // an auth_request_id scanned, not finished
	scannedBr         *browser
	agentA            *agent
	agentHuman        string
	pendingAgent      session
	br                *browser
	sso, actor        bool
	backupFile        string
	backupRefresh     string // a refresh token of the backup's time, used only on the restore
	kidsBefore        []string
	alice, bob, carol string
}

const upgradeSite = "handle /api/* {\n\tpalmgate_bearer {\n\t\tscope openid\n\t}\n\trespond \"sub={http.auth.user.id}\" 200\n}\npalmgate"

// TestUpgradeInPlace: the old binary makes every kind of state, is stopped, and
// this build started on its store serves it: the refresh and access tokens, the
// SSO session and the consent, the clients with their secrets, the agents, a
// pending login and registration, an unredeemed code, the rotated keys, and the
// old backup restored.
func TestUpgradeInPlace(t *testing.T) {
	t.Parallel()
	old := oldCaddy(t)
	for _, store := range []string{"badger", "postgres"} {
		t.Run(store, func(t *testing.T) { upgradeInPlace(t, old, store) })
	}
}

func upgradeInPlace(t *testing.T, old, store string) {
	a, b := newOIDCClient("upg-a", ""), newOIDCClient("upg-b", "")
	b.resources = []string{"https://api.upg.example"}
	sso := supports(t, old, "sso_session 12h")
	global := []string{"rate_limit off", a.config(), b.config()}
	if sso {
		global = append(global, "sso_session 12h", "registration open", "key_rotation 720h")
	}
	// What the old release leaves pending (a code, a login, a registration) is
	// used after a restart and the checks before it: it must not expire first on
	// a busy machine.
	for _, line := range []string{"auth_code_ttl 1h", "login_ttl 1h", "registration_session_ttl 1h"} {
		if supports(t, old, line) {
			global = append(global, line)
		}
	}
	opts := testserver.Options{Port: testserver.FreePort(t), AdminPort: testserver.FreePort(t), DataDir: t.TempDir(),
		Global: strings.Join(global, "\n"), Site: upgradeSite, Binary: old}
	if store == "postgres" {
		opts.Storage = "storage postgres \"" + pgtest.NewCluster(t).DSN(t) + "\""
	}
	oldE := start(t, opts)
	st := makeUpgradeState(t, oldE, a, b, sso, supports(t, old, "key_rotation 720h"))
	oldE.Stop()
	if t.Failed() {
		t.FailNow()
	}

	opts.Binary = ""
	newE := start(t, opts)
	newE.secrets = oldE.secrets
	checkUpgradeState(t, newE, st)
	newE.Stop()
	for _, line := range strings.Split(newE.Log(), "\n") {
		if strings.Contains(line, `"level":"error"`) { // a request failed (500), a sweep, ...
			t.Errorf("the upgraded instance logged an error: %s", line)
		}
	}

	if st.backupFile != "" {
		checkUpgradeRestore(t, newE, opts, st)
	}
	if store == "badger" { // the upgraded store moves to PostgreSQL
		dsn := pgtest.NewCluster(t).DSN(t)
		if out, err := newE.RunCommand(t, "palmgate", "migrate", "--from", "badger", filepath.Join(opts.DataDir, "palmgate"), "--to", "postgres", dsn); err != nil {
			t.Errorf("migrating the upgraded Badger store to PostgreSQL: %v\n%s", err, out)
		}
	}
}

func makeUpgradeState(t *testing.T, e *env, a, b oidcClient, sso, backup bool) *upgradeState {
	t.Helper()
	st := &upgradeState{a: a, b: b, sso: sso, alice: e.subject("alice"), bob: e.subject("bob"), carol: e.subject("carol")}
	st.kidsBefore = jwksKIDs(t, e)
	// Alice logs in at a in a browser (the SSO session), with offline_access.
	st.br = newSSOBrowser(e)
	code, _ := st.br.scanLogin(t, e.URL, a, st.alice)
	st.offline = e.redeem(t, a, code)
	if st.offline.refresh == "" {
		t.Fatalf("alice's login with offline_access got no refresh token")
	}
	// A second refresh family, kept for the restore of the backup.
	st.backupRefresh = e.redeem(t, a, freshLogin(t, e, a, st.carol, "scope", "openid offline_access")).refresh
	// Bob without offline_access.
	st.online = e.redeem(t, a, freshLogin(t, e, a, st.bob, "scope", "openid"))
	if sso {
		// Alice consents to b in her session.
		w, id := st.br.classify(t, e.URL, st.br.authorize(t, b))
		if w != toConsent {
			t.Fatalf("second client: not sent to the consent page")
		}
		reqID, token := st.br.consentForm(t, id)
		if resp := st.br.consent(t, reqID, token, "allow"); resp.Status != http.StatusFound {
			t.Fatalf("consent: status %d", resp.Status)
		}
	}
	// A developer in the portal, with an application.
	st.dev = e.portalSignIn(t, st.carol)
	st.portal.id, st.portal.secret = st.dev.create(t, "Notes Upgrade", "https://portal-upg.example/cb")
	st.portal.redirects = []string{"https://portal-upg.example/cb"}
	// A client of the admin API, logged in with.
	st.admin, _ = e.adminCreate(t, map[string]any{"name": "Ops Console", "redirect_uris": []string{"https://admin-app.example/cb"}})
	st.adminTok = e.redeem(t, st.admin, freshLogin(t, e, st.admin, st.alice, "scope", "openid offline_access"))
	if sso {
		// A public client registered dynamically, logged in with PKCE.
		st.dcr = e.registeredClient(t, map[string]any{"client_name": "DCR App", "redirect_uris": []string{"http://127.0.0.1:9/cb"},
			"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code", "refresh_token"}})
		verifier := oauth2.GenerateVerifier()
		code := freshLogin(t, e, st.dcr, st.bob, "code_challenge", oauth2.S256ChallengeFromVerifier(verifier), "code_challenge_method", "S256")
		resp := e.postToken(t, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {st.dcr.redirects[0]},
			"client_id": {st.dcr.id}, "code_verifier": {verifier}}).ExpectStatus(t, http.StatusOK)
		m := resp.Object(t)
		st.dcrTok = tokenSet{access: str(m["access_token"]), refresh: str(m["refresh_token"]), client: st.dcr.id}
		if st.dcrTok.refresh == "" {
			t.Errorf("the DCR client got no refresh token: %s", resp.Body)
		}
	}
	// An agent registered and owned by alice, and one whose registration waits.
	st.agentA = newAgent(t, "upg-agent-1")
	st.agentHuman = e.register(t, st.agentA, st.alice).humanID
	if sso { // the releases with SSO sessions have agent grants (requested_actor)
		freshLogin(t, e, a, st.alice, "scope", "openid", "requested_actor", st.agentA.deviceID)
		st.actor = true
	}
	st.pendingAgent = e.initSession(t, newAgent(t, "upg-agent-2").registration(time.Now()))
	// Alice on her agents page (a session of its own), where the release has it.
	if testserver.Do(t, "GET", e.URL+"/v1/human/agents", nil, "Accept", "application/json").Status == http.StatusOK {
		st.owner = e.openOwnerPage(t, st.alice)
	}
	// A code not redeemed and a login not yet scanned.
	st.unredeemed = freshLogin(t, e, a, st.bob)
	st.pendingBr = newSSOBrowser(e)
	w, id := st.pendingBr.classify(t, e.URL, st.pendingBr.authorize(t, a))
	if w != toScan {
		t.Fatalf("the pending login: not sent to the login page")
	}
	st.pendingLogin = id
	// A login scanned whose page has not fetched the answer yet.
	st.scannedBr = newSSOBrowser(e)
	w, id = st.scannedBr.classify(t, e.URL, st.scannedBr.authorize(t, a))
	if w != toScan {
		t.Fatalf("the scanned login: not sent to the login page")
	}
	var page loginPage
	st.scannedBr.do(t, "GET", "/oauth2/verify?auth_request_id="+id, nil, "Accept", "application/json").ExpectStatus(t, http.StatusOK).Decode(t, &page)
	e.scan(t, page, st.bob)
	st.scannedLogin = id
	// The backup, before the rotation.
	if backup {
		st.backupFile = filepath.Join(t.TempDir(), "old.backup")
		if out, err := e.RunCommand(t, "palmgate", "backup", "--to", st.backupFile, "--address", e.AdminAddr); err != nil {
			t.Fatalf("old backup: %v\n%s", err, out)
		}
	}
	// A rotation: the tokens above are now signed by retired keys.
	rotateKeys(t, e)
	if backup { // the releases with backups list the keys and their schedule
		out, err := e.RunCommand(t, "palmgate", "keys", "list", "--json", "--address", e.AdminAddr)
		if err != nil {
			t.Fatalf("keys list: %v\n%s", err, out)
		}
		st.keysListed = out
	}
	return st
}

func checkUpgradeState(t *testing.T, e *env, st *upgradeState) {
	t.Helper()
	kids := jwksKIDs(t, e)
	for _, k := range st.kidsBefore {
		if !strings.Contains(strings.Join(kids, " "), k) {
			t.Errorf("the JWKS after the upgrade lost key %s: %v", k, kids)
		}
	}
	// The old access tokens.
	e.expectUserinfo(t, st.offline.access, st.offline.sub)
	e.expectUserinfo(t, st.online.access, st.online.sub)
	if r := e.introspect(t, st.a, st.offline.access, true); r.Status != http.StatusOK || r.Object(t)["active"] != true {
		t.Errorf("introspection of the old access token: %d %s", r.Status, r.Body)
	}
	if r := e.do(t, "GET", "/api/x", nil, "Authorization", "Bearer "+st.offline.access); r.Status != http.StatusOK {
		t.Errorf("palmgate_bearer with the old access token: %d %s", r.Status, r.Body)
	}
	// The old refresh tokens, with the clients' old secrets.
	refresh := func(what string, c oidcClient, tok string) {
		t.Helper()
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok}}
		var hdr []string
		if c.secret != "" {
			hdr = []string{"Authorization", basicAuth(c.id, c.secret)}
		} else {
			form.Set("client_id", c.id)
		}
		r := e.postToken(t, form, hdr...)
		if r.Status != http.StatusOK {
			t.Errorf("%s: refresh of the old refresh token: %d %s", what, r.Status, r.Body)
			return
		}
		e.expectUserinfo(t, str(r.Object(t)["access_token"]), str(jwtPart(t, str(r.Object(t)["access_token"]), 1)["sub"]))
	}
	refresh("Caddyfile client", st.a, st.offline.refresh)
	refresh("admin API client", st.admin, st.adminTok.refresh)
	if st.sso {
		refresh("DCR public client", st.dcr, st.dcrTok.refresh)
	}
	// The old code.
	e.exchange(t, st.a, st.unredeemed, "")
	// The pending login.
	pb := st.pendingBr.at(e)
	var p loginPage
	pb.do(t, "GET", "/oauth2/verify?auth_request_id="+st.pendingLogin, nil, "Accept", "application/json").ExpectStatus(t, http.StatusOK).Decode(t, &p)
	if p.Status != "pending" {
		t.Errorf("the pending login: status %q", p.Status)
	} else {
		e.scan(t, p, st.bob)
		resp := pb.do(t, "GET", "/oauth2/verify?auth_request_id="+st.pendingLogin, nil)
		if q := callbackQuery(t, resp.Header.Get("Location"), st.a.redirects[0]); q.Get("code") == "" {
			t.Errorf("the pending login: %d, callback %v", resp.Status, q)
		} else {
			e.exchange(t, st.a, q.Get("code"), "")
		}
	}
	// The login scanned before the upgrade finishes after it.
	resp := st.scannedBr.at(e).do(t, "GET", "/oauth2/verify?auth_request_id="+st.scannedLogin, nil)
	if q := callbackQuery(t, resp.Header.Get("Location"), st.a.redirects[0]); resp.Status != http.StatusFound || q.Get("code") == "" {
		t.Errorf("the login scanned before the upgrade: %d, callback %v", resp.Status, q)
	} else {
		e.exchange(t, st.a, q.Get("code"), "")
	}
	// A logout with an ID token the old release signed ends that login.
	lo := e.do(t, "GET", "/oauth2/logout?"+url.Values{"id_token_hint": {st.online.id}}.Encode(), nil)
	if lo.Status != http.StatusOK {
		t.Errorf("logout with the old ID token: %d %s", lo.Status, testserver.Snippet(lo.Body))
	}
	e.expectRevoked(t, st.online.access)
	// The SSO session and the consent.
	if st.sso {
		br := st.br.at(e)
		if code, errCode := br.silent(t, e.URL, st.a, "prompt", "none"); code == "" {
			t.Errorf("the old SSO session, prompt=none: error %q, want a code", errCode)
		} else {
			e.exchange(t, st.a, code, "")
		}
		if code, errCode := br.silent(t, e.URL, st.b, "prompt", "none"); code == "" {
			t.Errorf("the old consent, prompt=none: error %q, want a code", errCode)
		}
		// The old consent names no resource: a request for one asks once more
		// (README, Single sign-on session), with the consent page.
		if w, _ := br.classify(t, e.URL, br.authorize(t, st.b, "resource", st.b.resources[0])); w != toConsent {
			t.Errorf("the old consent, a request for a resource: not sent to the consent page")
		}
		if _, errCode := br.silent(t, e.URL, st.b, "resource", st.b.resources[0], "prompt", "none"); errCode != "consent_required" {
			t.Errorf("the old consent, a request for a resource with prompt=none: error %q, want consent_required", errCode)
		}
	}
	// The agents.
	if l := e.lookupDevice(t, st.agentA.deviceID); !l.Registered || l.HumanID != st.agentHuman {
		t.Errorf("the old agent: %+v, want registered to %s", l, st.agentHuman)
	}
	if l := e.lookupKey(t, st.agentA.urlKey()); !l.Registered {
		t.Errorf("the old agent by key: %+v", l)
	}
	if st.actor { // the agent grant alice gave before
		e.agentToken(t, st.a, e.agentAssertion(t, st.agentA)).ExpectStatus(t, http.StatusOK)
	}
	c := e.verifyInfo(t, st.pendingAgent)
	if r := e.devScan(t, c, st.carol); r.Status != http.StatusOK {
		t.Errorf("the pending agent registration's scan: %d %s", r.Status, r.Body)
	}
	if s := e.status(t, st.pendingAgent.ID); str(s["status"]) != "completed" {
		t.Errorf("the pending agent registration: %v", s)
	}
	// The developer's portal session, and the application's secret.
	// A release before 2026-11-26 (before SSO sessions too) kept the portal's
	// session in its cookie alone, which no sign-out could end: this one asks
	// for a sign-in again (README, Upgrading).
	st.dev.e = e
	home := st.dev.get(t, "/portal")
	switch {
	case st.sso && (home.Status != http.StatusOK || !strings.Contains(string(home.Body), st.portal.id)):
		t.Errorf("the old portal session: %d, want the portal listing %s:\n%s", home.Status, st.portal.id, testserver.Snippet(home.Body))
	case !st.sso && (home.Status != http.StatusOK || !strings.Contains(string(home.Body), `id="signin"`)):
		t.Errorf("a cookie-only portal session of a release before 2026-11-26: %d, want the sign-in page:\n%s", home.Status, testserver.Snippet(home.Body))
	}
	e.redeem(t, st.portal, freshLogin(t, e, st.portal, st.bob, "scope", "openid"))
	// A new login at the admin API's client, with its old secret.
	e.redeem(t, st.admin, freshLogin(t, e, st.admin, st.carol, "scope", "openid"))
	// The keys, their states and the rotation schedule are the old one's.
	if out, err := e.RunCommand(t, "palmgate", "keys", "list", "--json", "--address", e.AdminAddr); err != nil {
		t.Errorf("keys list after the upgrade: %v\n%s", err, out)
	} else if st.keysListed != "" && out != st.keysListed {
		t.Errorf("keys list after the upgrade:\n%s\nbefore:\n%s", out, st.keysListed)
	}
	// The agents page session lists alice's agent.
	if st.owner != nil {
		st.owner.e = e
		if got := st.owner.listed(t); !slices.Contains(got, st.agentA.deviceID) {
			t.Errorf("the old agents page session lists %v, want %s", got, st.agentA.deviceID)
		}
	}
	// Ending alice's sessions ends the SSO session the old release started (in
	// no index: sessionIndexSince).
	if st.sso {
		testserver.Do(t, "DELETE", "http://"+e.AdminAddr+"/palmgate/humans/"+st.agentHuman+"/sessions", nil).ExpectStatus(t, http.StatusOK)
		if _, errCode := st.br.at(e).silent(t, e.URL, st.a, "prompt", "none"); errCode != "login_required" {
			t.Errorf("the old SSO session after ending alice's sessions: error %q, want login_required", errCode)
		}
	}
}

// checkUpgradeRestore restores the old binary's backup with this one into a fresh
// Badger store and serves it.
func checkUpgradeRestore(t *testing.T, e *env, opts testserver.Options, st *upgradeState) {
	t.Helper()
	dir := t.TempDir()
	if out, err := e.RunCommand(t, "palmgate", "restore", "--from", st.backupFile, "--storage", "badger", filepath.Join(dir, "palmgate")); err != nil {
		t.Fatalf("restoring the old backup: %v\n%s", err, out)
	}
	opts.DataDir, opts.Storage = dir, ""
	r := start(t, opts)
	r.secrets = e.secrets
	if l := r.lookupDevice(t, st.agentA.deviceID); !l.Registered {
		t.Errorf("the restored agent: %+v", l)
	}
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {st.backupRefresh}}
	if resp := r.postToken(t, form, "Authorization", basicAuth(st.a.id, st.a.secret)); resp.Status != http.StatusOK {
		t.Errorf("the restored refresh token: %d %s", resp.Status, resp.Body)
	}
	r.expectUserinfo(t, st.online.access, st.online.sub) // the backup's: its logout came after
}

// freshLogin logs subject in at c from a browser of its own (no session) and
// returns the code.
func freshLogin(t *testing.T, e *env, c oidcClient, subject string, params ...string) string {
	t.Helper()
	return freshLoginAt(t, e, e.URL, c, subject, params...)
}

// freshLoginAt is freshLogin at an instance e of issuer.
func freshLoginAt(t *testing.T, e *env, issuer string, c oidcClient, subject string, params ...string) string {
	t.Helper()
	code, _ := newSSOBrowser(e).scanLogin(t, issuer, c, subject, params...)
	return code
}
