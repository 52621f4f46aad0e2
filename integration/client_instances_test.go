package integration

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/pgtest"
	"github.com/palmgate/palmgate/internal/testserver"
)

// authorizeStatus is the status of an authorization request of client id with
// redirect (302 to the login page when both are good, 400 otherwise).
func (e *env) authorizeStatus(t *testing.T, id, redirect string) int {
	t.Helper()
	q := url.Values{"response_type": {"code"}, "client_id": {id}, "redirect_uri": {redirect}, "scope": {"openid"}}
	return e.do(t, "GET", "/oauth2/authorize?"+q.Encode(), nil).Status
}

// expectSharedClients: a client created or changed through a is honoured by b at
// once, and the other way round.
func expectSharedClients(t *testing.T, a, b *env) {
	t.Helper()
	r1, r2 := "https://shared.example/one", "https://shared.example/two"
	var c cliClient
	a.cliJSON(t, &c, "add", "--name", "Shared", "--redirect-uri", r1, "--redirect-uri", r2)
	if !b.authenticates(t, c.ID, c.Secret) || b.authorizeStatus(t, c.ID, r2) != http.StatusFound {
		t.Fatal("a client created on one instance is not honoured by the other at once")
	}
	// An emergency rotation (grace 0) on one instance after a graced one on the
	// other: only the newest secret works, at the token endpoint of both
	// (issue 18, finding 1).
	var graced cliClient
	a.cliJSON(t, &graced, "rotate-secret", c.ID, "--grace", "24h")
	if len(graced.Secrets) != 2 || !graced.Secrets[0].Current || time.Until(graced.Secrets[1].ExpiresAt) < 23*time.Hour || graced.PreviousExpiry == "" {
		t.Errorf("rotate-secret --grace 24h shows secrets %+v, previous until %q; want the current one and the previous one for 24h", graced.Secrets, graced.PreviousExpiry)
	}
	var rotated cliClient
	b.cliJSON(t, &rotated, "rotate-secret", c.ID, "--grace", "0s")
	expectOnlySecret(t, []*env{a, b}, c.ID, rotated.Secret, c.Secret, graced.Secret)
	var shown cliClient
	a.cliJSON(t, &shown, "show", c.ID)
	for _, got := range []cliClient{rotated, shown} {
		if len(got.Secrets) != 1 || !got.Secrets[0].Current || got.PreviousExpiry != "" {
			t.Errorf("after a rotation with grace 0 the admin API shows secrets %+v, previous until %q; want the current one only", got.Secrets, got.PreviousExpiry)
		}
	}
	if out := b.cli(t, "show", c.ID); !strings.Contains(out, "current secret works") || strings.Contains(out, "previous secret") {
		t.Errorf("client show after a rotation with grace 0 must show the current secret only:\n%s", out)
	}
	a.cli(t, "update", c.ID, "--redirect-uri", r1)
	if got := b.authorizeStatus(t, c.ID, r2); got != http.StatusBadRequest {
		t.Errorf("a redirect URI removed on one instance: the other answers %d, want 400", got)
	}
	if got := b.authorizeStatus(t, c.ID, r1); got != http.StatusFound {
		t.Errorf("the kept redirect URI on the other instance: %d, want 302", got)
	}
	b.cli(t, "remove", c.ID)
	if a.authenticates(t, c.ID, rotated.Secret) || a.authorizeStatus(t, c.ID, r1) != http.StatusBadRequest {
		t.Error("a client removed on one instance is still honoured by the other")
	}
}

// tokenEndpointAccepts reports whether /oauth2/token authenticates id with secret:
// a junk refresh token is invalid_grant (400) for an authenticated client,
// invalid_client (401) otherwise.
func (e *env) tokenEndpointAccepts(t *testing.T, id, secret string) bool {
	t.Helper()
	resp := e.do(t, "POST", "/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"junk"}}.Encode(),
		"Content-Type", "application/x-www-form-urlencoded", "Authorization", basicAuth(id, secret))
	switch resp.Status {
	case http.StatusBadRequest:
		return true
	case http.StatusUnauthorized:
		return false
	}
	t.Fatalf("token endpoint as %s: status %d %s", id, resp.Status, resp.Body)
	return false
}

// expectOnlySecret: on every instance the token endpoint accepts client id with
// live and refuses it with each of dead.
func expectOnlySecret(t *testing.T, instances []*env, id, live string, dead ...string) {
	t.Helper()
	for i, e := range instances {
		if !e.tokenEndpointAccepts(t, id, live) {
			t.Errorf("instance %d: the token endpoint refuses the newest secret", i)
		}
		for j, s := range dead {
			if e.tokenEndpointAccepts(t, id, s) {
				t.Errorf("instance %d: the token endpoint accepts secret %d, rotated out", i, j+1)
			}
		}
	}
}

var previousUntilRE = regexp.MustCompile(`the previous one, until <time class="local" id="previous-expires" datetime="[^"]+">(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \(UTC\)</time>`)

// expectPortalRotation: a developer rotates an application's secret with a day's
// grace on one instance, then with none on the other; the application page shows
// each live secret, and only the newest works anywhere (issue 18, finding 1).
func expectPortalRotation(t *testing.T, a, b *env) {
	t.Helper()
	onA := a.portalSignIn(t, a.subject("rotating-dev"))
	onB := &portalDev{e: b, c: onA.c} // the same browser: the session is valid on every instance
	id, s1 := onA.create(t, "Rotating App", "https://rotating.example/cb")
	if page := string(onA.get(t, "/portal/apps/"+id).Body); !strings.Contains(page, "the current one, until you rotate it.") {
		t.Errorf("a new application's page must show the current secret only:\n%s", testserver.Snippet([]byte(page)))
	}
	rotate := func(d *portalDev, grace string) (string, string) {
		r := d.post(t, "/portal/apps/"+id+"/rotate", url.Values{"csrf": {d.csrf(t)}, "grace": {grace}})
		if r.Status != http.StatusOK {
			t.Fatalf("rotate with grace %s: %d %s", grace, r.Status, testserver.Snippet(r.Body))
		}
		_, secret := pageClient(t, r.Body)
		return secret, string(r.Body)
	}
	s2, page := rotate(onA, "24h")
	m := previousUntilRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("after a rotation with a day's grace the page must show the previous secret's end:\n%s", testserver.Snippet([]byte(page)))
	}
	if until, err := time.Parse(time.DateTime, m[1]); err != nil || time.Until(until) < 23*time.Hour || time.Until(until) > 25*time.Hour {
		t.Errorf("the previous secret works until %s (%v); want a day from now", m[1], err)
	}
	s3, page := rotate(onB, "0")
	if strings.Contains(page, "previous one") || !strings.Contains(page, "the current one, until you rotate it.") {
		t.Errorf("after a rotation with grace 0 the page must show the current secret only:\n%s", testserver.Snippet([]byte(page)))
	}
	expectOnlySecret(t, []*env{a, b}, id, s3, s1, s2)
}

// TestClientsAcrossReload: Badger shared across a config reload.
func TestClientsAcrossReload(t *testing.T) {
	t.Parallel()
	e := startOIDC(t, nil)
	var c cliClient
	e.cliJSON(t, &c, "add", "--name", "Before reload", "--redirect-uri", "https://reload.example/cb")
	e.Reload(t, "rate_limit off\naccess_token_ttl 2h")
	if !e.authenticates(t, c.ID, c.Secret) {
		t.Fatal("a client created before the reload is not honoured after it")
	}
	expectSharedClients(t, e, e)
}

// TestClientsAcrossInstancesPostgres: two servers on one PostgreSQL database.
func TestClientsAcrossInstancesPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	storage := fmt.Sprintf("storage postgres %q", dsn)
	a := start(t, testserver.Options{Global: "rate_limit off", Storage: storage})
	b := start(t, testserver.Options{Global: "rate_limit off", Storage: storage})
	expectSharedClients(t, a, b)
	expectSharedClients(t, b, a)
	expectPortalRotation(t, a, b)
}
