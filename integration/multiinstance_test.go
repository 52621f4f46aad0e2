package integration

// Several instances on one PostgreSQL database, as behind a load balancer: two real
// caddy processes with the same issuer, each on its own port. What one instance
// consumed, revoked or rotated, the other honours within the bounds the README's
// "Caches and what they allow" states.

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/pgtest"
	"github.com/palmgate/palmgate/internal/testserver"
)

// Bounds of the README's cache table, as the tests hold the servers to them. A check
// that starts after the event passes if it sees the outcome within the bound plus
// slack for the request that observes it.
const (
	revocationBound = 2 * time.Second // core/oidc.RevocationMaxAge
	rotationBound   = 5 * time.Second // keys.ReloadInterval plus a store read, with margin
	leaderboardMax  = time.Second     // core/agent leaderboardMaxAge
	observeSlack    = 500 * time.Millisecond
)

// pair is two instances on one database with one issuer: a's URL.
type pair struct {
	a, b   *env
	issuer string
}

// multiCaddyfile is the Caddyfile of one instance: the shared issuer, the shared
// database, dev mode, the clients, and a bearer-protected route /api/ besides
// palmgate's own.
func multiCaddyfile(issuer, dsn, storageOptions string, clients []oidcClient) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{\n\tadmin 127.0.0.1:{adminport}\n\tpersist_config off\n\tpalmgate {\n")
	fmt.Fprintf(&b, "\t\tissuer %s\n", issuer)
	fmt.Fprintf(&b, "\t\tstorage postgres %q {\n%s\n\t\t}\n", dsn, storageOptions)
	b.WriteString("\t\tdev\n\t\trate_limit off\n")
	for _, c := range clients {
		b.WriteString(c.config())
	}
	b.WriteString("\t}\n}\n")
	b.WriteString("http://127.0.0.1:{port} {\n")
	b.WriteString("\thandle /api/* {\n\t\tpalmgate_bearer {\n\t\t\tscope openid\n\t\t}\n")
	b.WriteString("\t\trespond \"sub={http.auth.user.id}\" 200\n\t}\n\tpalmgate\n}\n")
	return b.String()
}

// sharedCaddyfile is multiCaddyfile on a new PostgreSQL cluster, for an issuer on
// a free port (the first instance's), with more global palmgate lines: what
// the tests of several instances, or of one on PostgreSQL, start from.
func sharedCaddyfile(t *testing.T, clients []oidcClient, global ...string) (port int, issuer, cf string) {
	t.Helper()
	dsn := pgtest.NewCluster(t).DSN(t)
	port = testserver.FreePort(t)
	issuer = "http://127.0.0.1:" + strconv.Itoa(port)
	cf = multiCaddyfile(issuer, dsn, "connect_timeout 2s\nstatement_timeout 3s", clients)
	if len(global) > 0 {
		cf = strings.Replace(cf, "\t\trate_limit off\n", "\t\trate_limit off\n\t\t"+strings.Join(global, "\n\t\t")+"\n", 1)
	}
	return port, issuer, cf
}

// startPair starts two instances on dsn, one after the other, or concurrently
// (two first starts racing on an empty database).
func startPair(t *testing.T, dsn string, clients []oidcClient, concurrently bool) *pair {
	t.Helper()
	portA := testserver.FreePort(t)
	issuer := "http://127.0.0.1:" + strconv.Itoa(portA)
	cf := multiCaddyfile(issuer, dsn, "connect_timeout 2s\nstatement_timeout 3s", clients)
	optsA := testserver.Options{Port: portA, Caddyfile: cf}
	optsB := testserver.Options{Caddyfile: cf}
	p := &pair{issuer: issuer}
	if !concurrently {
		p.a, p.b = start(t, optsA), start(t, optsB)
		return p
	}
	// testserver.Start fails the test from its goroutine (runtime.Goexit ends only
	// that goroutine); a nil server then stops this one.
	var wg sync.WaitGroup
	var sa, sb *testserver.Server
	wg.Add(2)
	go func() { defer wg.Done(); sa = testserver.Start(t, optsA) }()
	go func() { defer wg.Done(); sb = testserver.Start(t, optsB) }()
	wg.Wait()
	if sa == nil || sb == nil {
		t.Fatal("an instance did not start")
	}
	p.a, p.b = &env{Server: sa}, &env{Server: sb}
	return p
}

// loginAt logs subject in at client c through instance e alone (authorize, login
// page, scan, redirect back), whose URLs name the shared issuer, and returns the
// code.
func (p *pair) loginAt(t *testing.T, e *env, c oidcClient, subject string) string {
	t.Helper()
	resp := e.do(t, "GET", e.authURL(c), nil)
	loc := resp.Header.Get("Location")
	id, ok := strings.CutPrefix(loc, p.issuer+"/oauth2/verify?auth_request_id=")
	if resp.Status != http.StatusFound || !ok {
		t.Fatalf("%s: status %d Location %q, want 302 to the issuer's login page", resp.Request, resp.Status, loc)
	}
	var page loginPage
	e.do(t, "GET", "/oauth2/verify?auth_request_id="+id, nil, "Accept", "application/json").ExpectStatus(t, http.StatusOK).Decode(t, &page)
	e.scan(t, page, subject)
	q := e.finish(t, id, c.redirects[0])
	if q.Get("code") == "" {
		t.Fatalf("callback query %v, want a code", q)
	}
	return q.Get("code")
}

// jwksKIDs is the sorted key ids e publishes.
func jwksKIDs(t *testing.T, e *env) []string {
	t.Helper()
	var set struct {
		Keys []struct {
			Kid string `json:"kid"`
		} `json:"keys"`
	}
	e.do(t, "GET", "/oauth2/jwks", nil).ExpectStatus(t, http.StatusOK).Decode(t, &set)
	kids := make([]string, 0, len(set.Keys))
	for _, k := range set.Keys {
		kids = append(kids, k.Kid)
	}
	slices.Sort(kids)
	return kids
}

// waitFor polls check (every 50 ms) until it reports "" and returns how long that
// took; it fails the test with check's last report when a check begun after bound
// still fails. The bound is on when a check starts, not on how fast a loaded
// machine answers it: a check begun before the bound may fail and be retried.
func waitFor(t *testing.T, what string, bound time.Duration, since time.Time, check func() string) time.Duration {
	t.Helper()
	deadline := since.Add(bound)
	for {
		began := time.Now()
		msg := check()
		if msg == "" {
			took := time.Since(since)
			t.Logf("%s: after %s", what, took.Round(time.Millisecond))
			return took
		}
		if began.After(deadline) {
			t.Fatalf("%s: not within %s: %s", what, bound, msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// activeAt is "" when e's userinfo, introspection and palmgate_bearer all accept
// the access token, or what refused it.
func activeAt(t *testing.T, e *env, c oidcClient, access string) string {
	t.Helper()
	if r := e.userinfo(t, access); r.Status != http.StatusOK {
		return fmt.Sprintf("userinfo %d %s", r.Status, r.Body)
	}
	if r := e.introspect(t, c, access, true); r.Status != http.StatusOK || r.Object(t)["active"] != true {
		return fmt.Sprintf("introspection %d %s", r.Status, r.Body)
	}
	if r := e.do(t, "GET", "/api/x", nil, "Authorization", "Bearer "+access); r.Status != http.StatusOK {
		return fmt.Sprintf("palmgate_bearer %d %s", r.Status, r.Body)
	}
	return ""
}

// refusedAt is "" when e's userinfo, introspection and palmgate_bearer all refuse
// the access token as invalid (never 503: the database is up).
func refusedAt(t *testing.T, e *env, c oidcClient, access string) string {
	t.Helper()
	if r := e.userinfo(t, access); r.Status != http.StatusUnauthorized {
		return fmt.Sprintf("userinfo still answers %d %s", r.Status, r.Body)
	}
	if r := e.introspect(t, c, access, true); r.Status != http.StatusOK || r.Object(t)["active"] != false {
		return fmt.Sprintf("introspection still answers %d %s", r.Status, r.Body)
	}
	if r := e.do(t, "GET", "/api/x", nil, "Authorization", "Bearer "+access); r.Status != http.StatusUnauthorized {
		return fmt.Sprintf("palmgate_bearer still answers %d %s", r.Status, r.Body)
	}
	return ""
}

func refreshForm(c oidcClient, refresh string) url.Values {
	return url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "client_id": {c.id}, "client_secret": {c.secret}}
}

// TestMultiInstanceOIDC: codes, refresh tokens, revocations and keys across two
// instances on one database.
func TestMultiInstanceOIDC(t *testing.T) {
	t.Parallel()
	c := newOIDCClient("shop", "")
	p := startPair(t, pgtest.NewCluster(t).DSN(t), []oidcClient{c}, false)
	a, b := p.a, p.b

	t.Run("code single use across instances", func(t *testing.T) {
		code := p.loginAt(t, a, c, a.subject("code"))
		tok := a.redeem(t, c, code)
		form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {c.redirects[0]},
			"client_id": {c.id}, "client_secret": {c.secret}}
		expectOAuthError(t, b.postToken(t, form), http.StatusBadRequest, "invalid_grant")
		// The replay revoked the grant: B at once, A within the bound.
		if msg := refusedAt(t, b, c, tok.access); msg != "" {
			t.Errorf("at B, which saw the replay: %s", msg)
		}
		waitFor(t, "A refuses the tokens of a code replayed at B", revocationBound+observeSlack, time.Now(), func() string {
			return refusedAt(t, a, c, tok.access)
		})
		expectOAuthError(t, a.postToken(t, refreshForm(c, tok.refresh)), http.StatusBadRequest, "invalid_grant")
	})

	t.Run("refresh reuse detected across instances", func(t *testing.T) {
		tok := a.redeem(t, c, p.loginAt(t, a, c, a.subject("refresh")))
		resp := b.postToken(t, refreshForm(c, tok.refresh)).ExpectStatus(t, http.StatusOK).Object(t)
		r2, access2 := str(resp["refresh_token"]), str(resp["access_token"])
		if r2 == "" || access2 == "" {
			t.Fatalf("refresh at B: %v, want new tokens", resp)
		}
		// The rotated-out token, presented at A: reuse, and the family dies.
		expectOAuthError(t, a.postToken(t, refreshForm(c, tok.refresh)), http.StatusBadRequest, "invalid_grant")
		expectOAuthError(t, b.postToken(t, refreshForm(c, r2)), http.StatusBadRequest, "invalid_grant")
		waitFor(t, "B refuses the access token of a family A found reused", revocationBound+observeSlack, time.Now(), func() string {
			return refusedAt(t, b, c, access2)
		})
	})

	t.Run("revocation at A honoured by B", func(t *testing.T) {
		tok := a.redeem(t, c, p.loginAt(t, a, c, a.subject("revoke")))
		// B has verified (and cached) the token before the revocation.
		if msg := activeAt(t, b, c, tok.access); msg != "" {
			t.Fatalf("before the revocation, at B: %s", msg)
		}
		revoked := time.Now()
		a.revoke(t, c, tok.refresh, true).ExpectStatus(t, http.StatusOK)
		waitFor(t, "B refuses a token revoked at A", revocationBound+observeSlack, revoked, func() string {
			return refusedAt(t, b, c, tok.access)
		})
	})

	t.Run("palm challenge started at A completed via B", func(t *testing.T) {
		subject := a.subject("crossing")
		id := a.authorize(t, a.authURL(c))
		page := a.loginPageJSON(t, id)
		b.scan(t, page, subject) // the phone's request reaches B
		q := b.finish(t, id, c.redirects[0])
		tokB := b.redeem(t, c, q.Get("code"))
		tokA := a.redeem(t, c, p.loginAt(t, a, c, subject))
		if tokA.sub != tokB.sub {
			t.Errorf("pairwise sub %q through B, %q through A: want one", tokB.sub, tokA.sub)
		}
		a.expectUserinfo(t, tokB.access, tokA.sub)
		b.expectUserinfo(t, tokA.access, tokA.sub)
	})

	t.Run("key rotation at A accepted and published by B", func(t *testing.T) {
		rotated := time.Now()
		kid := rotateKeys(t, a)
		// A signs with the new key at once; B accepts it although its own reload
		// has not come yet (an unknown kid reloads the keys).
		tok := a.redeem(t, c, p.loginAt(t, a, c, a.subject("rotation")))
		if got := str(jwtPart(t, tok.access, 0)["kid"]); got != kid {
			t.Fatalf("access token kid %q, want the new key %q", got, kid)
		}
		if msg := activeAt(t, b, c, tok.access); msg != "" {
			t.Errorf("B, %s after the rotation, refuses a token of the new key: %s", time.Since(rotated).Round(time.Millisecond), msg)
		}
		// Refresh at B with the new key's refresh token, and B's JWKS.
		b.postToken(t, refreshForm(c, tok.refresh)).ExpectStatus(t, http.StatusOK)
		waitFor(t, "B publishes the key rotated at A", rotationBound, rotated, func() string {
			if kids := jwksKIDs(t, b); !slices.Contains(kids, kid) {
				return fmt.Sprintf("B's JWKS %v lacks %s", kids, kid)
			}
			return ""
		})
		if ka, kb := jwksKIDs(t, a), jwksKIDs(t, b); !slices.Equal(ka, kb) {
			t.Errorf("JWKS of A %v, of B %v: want the same keys", ka, kb)
		}
	})
}

// TestMultiInstanceSigningKeyWatch: a rotation at A reaches B's JWKS by B's periodic
// reload alone, no unknown kid having been presented to B.
func TestMultiInstanceSigningKeyWatch(t *testing.T) {
	t.Parallel()
	p := startPair(t, pgtest.NewCluster(t).DSN(t), nil, false)
	rotated := time.Now()
	kid := rotateKeys(t, p.a)
	waitFor(t, "B publishes the key rotated at A", rotationBound, rotated, func() string {
		if kids := jwksKIDs(t, p.b); !slices.Contains(kids, kid) {
			return fmt.Sprintf("B's JWKS %v lacks %s", kids, kid)
		}
		return ""
	})
}

// TestMultiInstanceRegistry: a registration started at A is read, completed and
// looked up at B; the signed challenge of one instance cannot be replayed at the
// other.
func TestMultiInstanceRegistry(t *testing.T) {
	t.Parallel()
	p := startPair(t, pgtest.NewCluster(t).DSN(t), nil, false)
	a, b := p.a, p.b

	// B's leaderboard, cached before the registration.
	before := totalAgents(b.leaderboard(t, ""))

	ag := newAgent(t, "crossing-agent")
	body := ag.registration(time.Now())
	s := a.initSession(t, body)
	// The signed registration challenge is single use on every instance.
	b.do(t, "POST", "/v1/agent/register/init", body).ExpectError(t, http.StatusBadRequest, "challenge_replayed", "")
	c := a.verifyInfo(t, s)
	if st := b.status(t, s.ID); str(st["status"]) != "pending" {
		t.Fatalf("status at B of a session started at A: %v, want pending", st)
	}
	if m := b.devScan(t, c, b.subject("owner")).ExpectStatus(t, http.StatusOK).Object(t); str(m["status"]) != "verified" {
		t.Fatalf("dev-scan at B: %v", m)
	}
	registered := time.Now()
	st := b.status(t, s.ID)
	if str(st["status"]) != "completed" {
		t.Fatalf("status at B after the scan: %v, want completed", st)
	}
	la, lb := a.lookupDevice(t, ag.deviceID), b.lookupDevice(t, ag.deviceID)
	if !la.Registered || !lb.Registered || la.HumanID != lb.HumanID || la.RegisteredAt != lb.RegisteredAt {
		t.Errorf("lookup at A %+v, at B %+v: want one registration", la, lb)
	}
	if l := a.lookupKey(t, ag.urlKey()); !l.Registered || l.HumanID != lb.HumanID {
		t.Errorf("key lookup at A: %+v", l)
	}
	m := b.do(t, "POST", "/v1/agent/verify/signature", ag.sign("hello", time.Now().UnixMilli())).ExpectStatus(t, http.StatusOK).Object(t)
	if m["verified"] != true || m["registered"] != true {
		t.Errorf("signature check at B: %v, want verified and registered", m)
	}
	waitFor(t, "A's leaderboard counts the registration made through B", leaderboardMax+observeSlack, registered, func() string {
		if n := totalAgents(a.leaderboard(t, "")); n != before+1 {
			return fmt.Sprintf("A counts %d agents, want %d", n, before+1)
		}
		return ""
	})
	waitFor(t, "B's leaderboard counts it", leaderboardMax+observeSlack, registered, func() string {
		if n := totalAgents(b.leaderboard(t, "")); n != before+1 {
			return fmt.Sprintf("B counts %d agents, want %d", n, before+1)
		}
		return ""
	})
}

// TestMultiInstanceFirstStart: two instances starting together on an empty database
// end up with one set of signing keys and one pairwise secret.
func TestMultiInstanceFirstStart(t *testing.T) {
	t.Parallel()
	cluster := pgtest.NewCluster(t)
	c := newOIDCClient("shop", "")
	for round := range 3 {
		t.Run(fmt.Sprintf("round %d", round), func(t *testing.T) {
			p := startPair(t, cluster.DSN(t), []oidcClient{c}, true)
			ka, kb := jwksKIDs(t, p.a), jwksKIDs(t, p.b)
			if len(ka) != 3 || !slices.Equal(ka, kb) {
				t.Errorf("JWKS of A %v, of B %v: want the same three keys (one RS256, one ES256, one EdDSA)", ka, kb)
			}
			subject := p.a.subject("first")
			tokA := p.a.redeem(t, c, p.loginAt(t, p.a, c, subject))
			tokB := p.b.redeem(t, c, p.loginAt(t, p.b, c, subject))
			if tokA.sub != tokB.sub {
				t.Errorf("pairwise sub %q at A, %q at B: the instances hold different pairwise secrets", tokA.sub, tokB.sub)
			}
		})
	}
}
