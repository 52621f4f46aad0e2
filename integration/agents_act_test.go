package integration

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/internal/testserver"
)

// agentRoute is upstream's route for path behind palmgate_bearer with options,
// passing the agent placeholder up besides the subject.
func (u *upstream) agentRoute(path string, options ...string) string {
	return fmt.Sprintf("route %s {\npalmgate_bearer {\n%s\n}\nreverse_proxy 127.0.0.1:%d {\n"+
		"header_up X-User-Sub {http.auth.user.id}\nheader_up X-User-Agent {http.auth.user.agent_id}\n}\n}\n",
		path, strings.Join(options, "\n"), u.port)
}

// agentAssertion is an RFC 7523 assertion of a signed by its key for the token
// endpoint of e, expiring a minute after now (long enough for a loaded machine:
// it is used at once).
func (e *env) agentAssertion(t *testing.T, a *agent) string {
	t.Helper()
	now := time.Now()
	s, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{
		"iss": a.deviceID, "sub": a.deviceID, "aud": e.URL + "/oauth2/token",
		"iat": now.Unix(), "exp": now.Add(time.Minute).Unix(), "jti": randHex(16),
	}).SignedString(a.priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (e *env) agentToken(t *testing.T, c oidcClient, assertion string, kv ...string) *testserver.Response {
	t.Helper()
	form := url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}, "assertion": {assertion},
		"client_id": {c.id}, "client_secret": {c.secret}}
	for i := 0; i+1 < len(kv); i += 2 {
		form.Set(kv[i], kv[i+1])
	}
	return e.postToken(t, form)
}

// TestAgentActsForItsHuman: a person lets their registered agent act for them
// towards an application (requested_actor, through the login page and a palm
// scan); the agent obtains a token with its own key and calls an upstream behind
// `palmgate_bearer { agents allow }`, which sees the person's pairwise sub and
// the agent; a site with the default (deny) and /oauth2/check without
// ?agents=allow refuse the same token.
func TestAgentActsForItsHuman(t *testing.T) {
	u := newUpstream(t)
	shop := newOIDCClient("shop", "")
	site := "palmgate\n" + u.agentRoute("/agents/*", "agents allow") + u.agentRoute("/people/*") + u.agentRoute("/only/*", "agents only")
	e := start(t, oidcOptions([]oidcClient{shop}, site))
	alice, bob := e.subject("alice"), e.subject("bob")
	bot := newAgent(t, "shopping-bot-"+randHex(4))
	e.register(t, bot, alice)
	person := e.tokensFor(t, shop, alice, "openid orders:read")

	// Bob cannot let alice's agent act for him: refused back to the client.
	id := e.authorize(t, e.authURL(shop, "scope", "openid orders:read", "requested_actor", bot.deviceID))
	e.scan(t, e.loginPageJSON(t, id), bob)
	q := e.finish(t, id, shop.redirects[0])
	if q.Get("error") != "invalid_request" || !strings.Contains(q.Get("error_description"), "not registered to the person") {
		t.Fatalf("bob's consent to alice's agent: callback %v, want invalid_request", q)
	}
	expectOAuthError(t, e.agentToken(t, shop, e.agentAssertion(t, bot)), http.StatusBadRequest, "invalid_grant")

	// Alice consents: the login page and the palm app name the agent.
	id = e.authorize(t, e.authURL(shop, "scope", "openid orders:read", "requested_actor", bot.deviceID))
	page := e.do(t, "GET", e.verifyURL(id), nil).ExpectStatus(t, http.StatusOK)
	if !strings.Contains(string(page.Body), `id="requested-actor"`) || !strings.Contains(string(page.Body), bot.deviceID) {
		t.Errorf("login page does not name the agent %s:\n%s", bot.deviceID, testserver.Snippet(page.Body))
	}
	p := e.loginPageJSON(t, id)
	if app := e.do(t, "GET", p.ScanURL, nil).ExpectStatus(t, http.StatusOK).Object(t); !strings.Contains(fmt.Sprint(app), bot.deviceID) {
		t.Errorf("the palm app's challenge %v does not name the agent", app)
	}
	e.scan(t, p, alice)
	if q := e.finish(t, id, shop.redirects[0]); q.Get("code") == "" {
		t.Fatalf("alice's consent: callback %v, want a code", q)
	}

	// The agent's token.
	assertion := e.agentAssertion(t, bot)
	resp := e.agentToken(t, shop, assertion, "scope", "orders:read").ExpectStatus(t, http.StatusOK)
	tok := resp.Object(t)
	access := str(tok["access_token"])
	if access == "" || tok["refresh_token"] != nil || tok["id_token"] != nil || str(tok["scope"]) != "orders:read" {
		t.Fatalf("agent token answer %s: want an access token alone with scope orders:read", resp.Body)
	}
	claims := jwtPart(t, access, 1)
	act, _ := claims["act"].(map[string]any)
	if str(claims["sub"]) != person.sub || str(act["sub"]) != bot.deviceID || str(act["sub_profile"]) != "ai_agent" {
		t.Errorf("agent token claims %v: want sub %s and act {sub %s, sub_profile ai_agent}", claims, person.sub, bot.deviceID)
	}
	expectOAuthError(t, e.agentToken(t, shop, assertion), http.StatusBadRequest, "invalid_grant") // its jti is spent

	// The reference agent does the same with its `token` command.
	if out := runExampleAgent(t, bot, "token", "-server", e.URL, "-device", bot.deviceID, "-client", shop.id, "-secret", shop.secret,
		"-call", e.URL+"/agents/orders"); !strings.Contains(out, `{"upstream":true}`) {
		t.Errorf("examples/agent token: %s", out)
	}

	// agents allow: the upstream sees alice's pairwise sub and the agent; a
	// client-sent X-Palmgate-Agent-Id never reaches it.
	got := u.call(t, e, "GET", "/agents/orders", "Bearer "+access, "X-Palmgate-Agent-Id", "forged")
	if got.Status != http.StatusOK || got.seen == nil {
		t.Fatalf("agents allow: %d %s, want the upstream's 200", got.Status, got.Body)
	}
	for name, want := range map[string]string{"X-User-Sub": person.sub, "X-Palmgate-Sub": person.sub, "X-User-Agent": bot.deviceID, "X-Palmgate-Agent-Id": bot.deviceID} {
		if v := got.seen.Values(name); len(v) != 1 || v[0] != want {
			t.Errorf("agents allow: upstream saw %s %q, want %q", name, v, want)
		}
	}
	got = u.call(t, e, "GET", "/agents/orders", "Bearer "+person.access, "X-Palmgate-Agent-Id", bot.deviceID)
	if got.Status != http.StatusOK || got.seen == nil || len(got.seen.Values("X-Palmgate-Agent-Id")) != 0 || got.seen.Get("X-User-Agent") != "" {
		t.Errorf("agents allow, alice's own token with a forged agent header: %d, upstream saw %v", got.Status, got.seen)
	}
	// The default (deny) refuses the agent's token, admits alice's; only, the reverse.
	expectAgentRefused(t, u.call(t, e, "GET", "/people/orders", "Bearer "+access))
	if got := u.call(t, e, "GET", "/people/orders", "Bearer "+person.access); got.Status != http.StatusOK {
		t.Errorf("agents deny, alice's own token: %d", got.Status)
	}
	expectAgentRefused(t, u.call(t, e, "GET", "/only/orders", "Bearer "+person.access))
	if got := u.call(t, e, "GET", "/only/orders", "Bearer "+access); got.Status != http.StatusOK {
		t.Errorf("agents only, the agent's token: %d", got.Status)
	}

	// /oauth2/check: deny by default, ?agents=allow reports the agent.
	if r := e.do(t, "GET", "/oauth2/check", nil, "Authorization", "Bearer "+access); r.Status != http.StatusForbidden {
		t.Errorf("/oauth2/check of an agent's token: %d, want 403", r.Status)
	}
	e.do(t, "GET", "/oauth2/check?agents=sometimes", nil, "Authorization", "Bearer "+access).ExpectStatus(t, http.StatusBadRequest)
	if r := e.do(t, "GET", "/oauth2/check?agents=only", nil, "Authorization", "Bearer "+person.access); r.Status != http.StatusForbidden {
		t.Errorf("/oauth2/check?agents=only of alice's own token: %d, want 403", r.Status)
	}
	r := e.do(t, "GET", "/oauth2/check?agents=allow", nil, "Authorization", "Bearer "+access).ExpectStatus(t, http.StatusOK)
	if r.Header.Get("X-Palmgate-Agent-Id") != bot.deviceID || r.Header.Get("X-Palmgate-Sub") != person.sub {
		t.Errorf("/oauth2/check?agents=allow headers %v", r.Header)
	}
	// Introspection reports act.
	in := e.do(t, "POST", "/oauth2/introspect", url.Values{"token": {access}}.Encode(),
		"Content-Type", "application/x-www-form-urlencoded", "Authorization", basicAuth(shop.id, shop.secret)).ExpectStatus(t, http.StatusOK).Object(t)
	if ia, _ := in["act"].(map[string]any); in["active"] != true || str(ia["sub"]) != bot.deviceID {
		t.Errorf("introspection %v, want active with act.sub %s", in, bot.deviceID)
	}
	// Discovery lists the grant type.
	disc := e.do(t, "GET", "/oauth2/.well-known/openid-configuration", nil).ExpectStatus(t, http.StatusOK).Object(t)
	if !strings.Contains(fmt.Sprint(disc["grant_types_supported"]), "urn:ietf:params:oauth:grant-type:jwt-bearer") {
		t.Errorf("grant_types_supported %v lacks the jwt-bearer grant", disc["grant_types_supported"])
	}
}

// expectAgentRefused checks palmgate_bearer's refusal of a token whose holder
// the site's agents mode does not admit: 403 insufficient_scope, upstream untouched.
func expectAgentRefused(t *testing.T, p proxied) {
	t.Helper()
	if p.Status != http.StatusForbidden || p.seen != nil {
		t.Errorf("%s: %d (upstream reached: %v), want 403 before the upstream", p.Request, p.Status, p.seen != nil)
	}
	if h := p.Header.Get("WWW-Authenticate"); !strings.Contains(h, `error="insufficient_scope"`) {
		t.Errorf("%s: WWW-Authenticate %q, want insufficient_scope", p.Request, h)
	}
}

// consentAgent lets agent a act for subject towards client c (requested_actor,
// a palm scan) and returns a fresh token of the agent.
func (e *env) consentAgent(t *testing.T, c oidcClient, subject string, a *agent) string {
	t.Helper()
	q := e.login(t, e.authURL(c, "scope", "openid orders:read", "requested_actor", a.deviceID), subject, c.redirects[0])
	if q.Get("code") == "" {
		t.Fatalf("consent to %s: callback %v, want a code", a.deviceID, q)
	}
	resp := e.agentToken(t, c, e.agentAssertion(t, a)).ExpectStatus(t, http.StatusOK)
	return str(resp.Object(t)["access_token"])
}

// ownerGrants are the grants the verified owner page lists (its JSON form).
func (p *ownerPage) grants(t *testing.T) []map[string]any {
	t.Helper()
	var j struct {
		Grants []map[string]any `json:"grants"`
	}
	p.get(t, "application/json").ExpectStatus(t, http.StatusOK).Decode(t, &j)
	return j.Grants
}

// TestAgentGrantsOnTheOwnersPage: the owner's agents page lists each agent's
// grants (application, scopes, expiry, last use) to its owner alone; revoking one
// stops new tokens and live ones at once; removing an agent does the same.
func TestAgentGrantsOnTheOwnersPage(t *testing.T) {
	u := newUpstream(t)
	shop := newOIDCClient("shop", "")
	e := start(t, oidcOptions([]oidcClient{shop}, "palmgate\n"+u.agentRoute("/agents/*", "agents allow")))
	alice, bob := e.subject("alice"), e.subject("bob")
	revoked, removed := newAgent(t, "revoked-bot-"+randHex(4)), newAgent(t, "removed-bot-"+randHex(4))
	byOperator := newAgent(t, "operator-removed-bot-"+randHex(4))
	e.register(t, revoked, alice)
	e.register(t, removed, alice)
	e.register(t, byOperator, bob)
	revokedTok := e.consentAgent(t, shop, alice, revoked)
	removedTok := e.consentAgent(t, shop, alice, removed)
	operatorTok := e.consentAgent(t, shop, bob, byOperator)

	if g := e.openOwnerPage(t, bob).grants(t); len(g) != 1 || str(g[0]["deviceId"]) != byOperator.deviceID {
		t.Errorf("bob's page lists %v; want his agent's grant alone (a person's agents' grants are theirs alone)", g)
	}
	page := e.openOwnerPage(t, alice)
	html := string(page.get(t, "text/html").ExpectStatus(t, http.StatusOK).Body)
	if !strings.Contains(html, `id="grants"`) || !strings.Contains(html, revoked.deviceID) || !strings.Contains(html, shop.name) {
		t.Errorf("alice's page does not show the grants:\n%s", testserver.Snippet([]byte(html)))
	}
	grants := page.grants(t)
	if len(grants) != 2 {
		t.Fatalf("alice's grants %v, want two", grants)
	}
	for _, g := range grants {
		if str(g["clientId"]) != shop.id || str(g["application"]) != shop.name || !timeRE.MatchString(str(g["expiresAt"])) ||
			!timeRE.MatchString(str(g["lastUsedAt"])) || fmt.Sprint(g["scopes"]) != "[openid orders:read]" {
			t.Errorf("grant %v: want shop's, openid orders:read, an expiry and a last use", g)
		}
	}
	// Bob's page cannot revoke alice's grant.
	bobPage := e.openOwnerPage(t, bob)
	form := url.Values{"csrf": {bobPage.csrf}, "deviceId": {revoked.deviceID}, "clientId": {shop.id}}.Encode()
	testserver.DoWith(t, bobPage.browser, "POST", e.URL+"/v1/human/agents/revoke", form, "Content-Type", "application/x-www-form-urlencoded").
		ExpectStatus(t, http.StatusNotFound)
	if got := u.call(t, e, "GET", "/agents/x", "Bearer "+revokedTok); got.Status != http.StatusOK {
		t.Fatalf("the grant bob tried to revoke stopped working: %d", got.Status)
	}
	// Alice revokes one: refused at once, and no new token.
	form = url.Values{"csrf": {page.csrf}, "deviceId": {revoked.deviceID}, "clientId": {shop.id}}.Encode()
	testserver.DoWith(t, page.browser, "POST", e.URL+"/v1/human/agents/revoke", form, "Content-Type", "application/x-www-form-urlencoded").
		ExpectStatus(t, http.StatusOK)
	if got := u.call(t, e, "GET", "/agents/x", "Bearer "+revokedTok); got.Status != http.StatusUnauthorized || got.seen != nil {
		t.Errorf("a revoked grant's live token: %d, want 401", got.Status)
	}
	expectOAuthError(t, e.agentToken(t, shop, e.agentAssertion(t, revoked)), http.StatusBadRequest, "invalid_grant")
	if g := page.grants(t); len(g) != 1 || str(g[0]["deviceId"]) != removed.deviceID {
		t.Errorf("grants after the revocation %v, want %s's alone", g, removed.deviceID)
	}
	// Alice removes the other agent: its token and its key stop working at once.
	page.remove(t, removed.deviceID, page.csrf).ExpectStatus(t, http.StatusOK)
	if got := u.call(t, e, "GET", "/agents/x", "Bearer "+removedTok); got.Status != http.StatusUnauthorized || got.seen != nil {
		t.Errorf("a removed agent's live token: %d, want 401", got.Status)
	}
	expectOAuthError(t, e.agentToken(t, shop, e.agentAssertion(t, removed)), http.StatusBadRequest, "invalid_grant")

	// An agent the operator removes (admin API) loses its grants the same way.
	testserver.Do(t, "DELETE", "http://"+e.AdminAddr+"/palmgate/agents/"+byOperator.deviceID, nil).ExpectStatus(t, http.StatusOK)
	if got := u.call(t, e, "GET", "/agents/x", "Bearer "+operatorTok); got.Status != http.StatusUnauthorized || got.seen != nil {
		t.Errorf("an agent removed by the operator: its live token %d, want 401", got.Status)
	}
}

// runExampleAgent builds examples/agent and runs it with a's key and args,
// returning its output; a failure fails the test.
func runExampleAgent(t *testing.T, a *agent, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "agent")
	if out, err := exec.Command("go", "build", "-o", bin, "../examples/agent").CombinedOutput(); err != nil {
		t.Fatalf("building examples/agent: %v\n%s", err, out)
	}
	der, err := x509.MarshalPKCS8PrivateKey(a.priv)
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, "agent-key.pem")
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append(args[:1:1], append([]string{"-key", keyPath}, args[1:]...)...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		shown := slices.Clone(args) // the client's secret stays out of the test's output
		for i := range shown[:max(0, len(shown)-1)] {
			if shown[i] == "-secret" {
				shown[i+1] = "REDACTED"
			}
		}
		t.Fatalf("examples/agent %v: %v\n%s", shown, err, out)
	}
	return string(out)
}
