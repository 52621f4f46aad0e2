package integration

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"

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
	var rotated cliClient
	b.cliJSON(t, &rotated, "rotate-secret", c.ID, "--grace", "0s")
	if a.authenticates(t, c.ID, c.Secret) || !a.authenticates(t, c.ID, rotated.Secret) {
		t.Error("a secret rotated out (no grace) on one instance still works on the other, or the new one does not")
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
}
