package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/palmgate/palmgate/internal/pgtest"
	"github.com/palmgate/palmgate/internal/testserver"
)

// TestMigrateBadgerToPostgres runs a palmgate on Badger, moves its data with
// `caddy palmgate migrate --from badger <dir> --to postgres <dsn>` and runs it again
// on PostgreSQL: agents, the leaderboard, pairwise subjects, refresh tokens and
// signing keys are all still there. A locked Badger directory and a non-empty target
// are refused, leaving the database as it was.
func TestMigrateBadgerToPostgres(t *testing.T) {
	t.Parallel()
	dsn, password := migrateDSN(t)
	shop := newOIDCClient("shop", "")
	opts := oidcOptions([]oidcClient{shop}, "palmgate")
	opts.Env = []string{"PALMGATE_MIGRATE_DSN=" + dsn}
	e := &env{Server: testserver.Start(t, opts)}

	// Three humans with 3, 2 and 1 agents.
	alice, bob, carol := e.subject("alice"), e.subject("bob"), e.subject("carol")
	var agents []*agent
	for i, who := range []string{alice, bob, alice, carol, bob, alice} {
		a := newAgent(t, fmt.Sprint("migrating-", i))
		e.register(t, a, who)
		agents = append(agents, a)
	}
	before := e.snapshot(t, agents, nil)
	if len(before.board) != 3 || before.board[0].AgentCount != 3 || totalAgents(before.board) != 6 {
		t.Fatalf("leaderboard before the migration: %+v, want 3 humans with 3, 2 and 1 agents", before.board)
	}
	// Logins: grants, refresh tokens, pairwise subjects.
	aliceTokens := e.tokensFor(t, shop, alice, "openid offline_access")
	bobTokens := e.tokensFor(t, shop, bob, "openid offline_access")
	if aliceTokens.refresh == "" || aliceTokens.sub == bobTokens.sub {
		t.Fatalf("logins: alice %+v, bob %+v; want a refresh token and two subs", aliceTokens, bobTokens)
	}
	kids := e.jwksKids(t)

	badgerDir := filepath.Join(e.DataDir, "palmgate")
	migrate := func(dsnArg string) (string, error) {
		t.Helper()
		out, err := e.RunCommand(t, "palmgate", "migrate", "--from", "badger", badgerDir, "--to", "postgres", dsnArg)
		if password != "" && strings.Contains(out, password) {
			t.Errorf("migrate printed the DSN's password:\n%s", out)
		}
		return out, err
	}

	t.Log("while the server runs, its Badger directory is locked")
	out, err := migrate("{env.PALMGATE_MIGRATE_DSN}")
	if err == nil || !strings.Contains(out, "in use") || !strings.Contains(out, "stop it first") {
		t.Errorf("migrate from a running server's store: %v, want a failure saying to stop it first:\n%s", err, out)
	}
	if n := kvRows(t, dsn); n != 0 {
		t.Errorf("a refused migrate left %d rows in PostgreSQL", n)
	}

	e.Stop()
	began := time.Now()
	out, err = migrate("{env.PALMGATE_MIGRATE_DSN}")
	t.Logf("migrate took %v:\n%s", time.Since(began).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	for _, want := range []string{"KIND", "CHECKSUM", "Verified"} {
		if !strings.Contains(out, want) {
			t.Errorf("migrate output lacks %q", want)
		}
	}
	if strings.Contains(out, "MISMATCH") {
		t.Errorf("migrate output reports a mismatch")
	}
	expectSameRecords(t, badgerDir, dsn)

	t.Log("the same data served from PostgreSQL, on the same issuer URL")
	pgOpts := oidcOptions([]oidcClient{shop}, "palmgate")
	pgOpts.Port = e.Port
	pgOpts.Storage = fmt.Sprintf("storage postgres %q", dsn)
	p := &env{Server: testserver.Start(t, pgOpts)}
	if d := before.diff(p.snapshot(t, agents, nil)); d != "" {
		t.Errorf("registry after the migration differs:\n%s", d)
	}
	if got := p.jwksKids(t); !slices.Equal(got, kids) {
		t.Errorf("JWKS kids after the migration %v, want %v", got, kids)
	}
	resp := p.refresh(t, shop, aliceTokens.refresh).ExpectStatus(t, http.StatusOK)
	if access := str(resp.Object(t)["access_token"]); access == "" {
		t.Errorf("refresh: no access token: %s", resp.Body)
	} else {
		p.expectUserinfo(t, access, aliceTokens.sub)
	}
	if got := p.tokensFor(t, shop, alice, "openid").sub; got != aliceTokens.sub {
		t.Errorf("alice's sub after the migration %q, want %q", got, aliceTokens.sub)
	}
	if got := p.tokensFor(t, shop, bob, "openid").sub; got != bobTokens.sub {
		t.Errorf("bob's sub after the migration %q, want %q", got, bobTokens.sub)
	}
	p.Stop()

	t.Log("a second migrate into the now non-empty database is refused and changes nothing")
	rows := kvTable(t, dsn)
	out, err = migrate(dsn)
	if err == nil || !strings.Contains(out, "refusing to migrate") || !strings.Contains(out, "nothing was written") {
		t.Errorf("migrate into a non-empty database: %v, want a refusal:\n%s", err, out)
	}
	if after := kvTable(t, dsn); !slices.Equal(after, rows) {
		t.Errorf("the refused migrate changed the database: %d rows before, %d after", len(rows), len(after))
	}
}

// migrateDSN returns the DSN of an empty database for t, with a password added when
// it has none (the private clusters trust local users, so any password works) so
// that a test can check it is never printed, and that password.
//
// The integration tests' TestMain is testserver.Main, which does not stop pgtest's
// shared cluster, so the database lives on a cluster of t's own (removed when t
// ends) unless PALMGATE_TEST_POSTGRES names a server.
func migrateDSN(t *testing.T) (dsn, password string) {
	t.Helper()
	if os.Getenv(pgtest.EnvDSN) != "" {
		dsn = pgtest.DSN(t)
	} else {
		dsn = pgtest.NewCluster(t).DSN(t)
	}
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Password != "" {
		return dsn, cfg.Password
	}
	password = "pw-" + randHex(8)
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.User = url.UserPassword(u.User.Username(), password)
		return u.String(), password
	}
	return dsn + " password=" + password, password
}

// jwksKids lists the kids of the server's JWKS, sorted.
func (e *env) jwksKids(t *testing.T) []string {
	t.Helper()
	var set struct {
		Keys []struct {
			Kid string `json:"kid"`
		} `json:"keys"`
	}
	e.do(t, "GET", "/oauth2/jwks", nil).ExpectStatus(t, http.StatusOK).Decode(t, &set)
	var kids []string
	for _, k := range set.Keys {
		kids = append(kids, k.Kid)
	}
	slices.Sort(kids)
	if len(kids) == 0 {
		t.Fatal("JWKS has no keys")
	}
	return kids
}

// kvRows counts the rows of palmgate_kv, 0 when the table does not exist.
func kvRows(t *testing.T, dsn string) int {
	t.Helper()
	conn := pgConnect(t, dsn)
	var exists bool
	if err := conn.QueryRow(context.Background(), `SELECT to_regclass('palmgate_kv') IS NOT NULL`).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if !exists {
		return 0
	}
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM palmgate_kv`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// kvTable reads every row of palmgate_kv, expired ones included, as text.
func kvTable(t *testing.T, dsn string) []string {
	t.Helper()
	rows, err := pgConnect(t, dsn).Query(context.Background(), `SELECT key, value, expires_at FROM palmgate_kv ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		var k, v []byte
		var exp *time.Time
		if err := rows.Scan(&k, &v, &exp); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%q=%x@%v", k, v, exp))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func pgConnect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// expectSameRecords reads the Badger store (with Badger itself, not palmgate's code)
// and palmgate_kv, and expects the same records with the same expiry instants.
// Records expiring within a minute are left out: they may expire in between.
func expectSameRecords(t *testing.T, badgerDir, dsn string) {
	t.Helper()
	type rec struct {
		value     string
		expiresAt time.Time
	}
	soon := time.Now().Add(time.Minute)
	fresh := func(exp time.Time) bool { return exp.IsZero() || exp.After(soon) }
	want := map[string]rec{}
	db, err := badger.Open(badger.DefaultOptions(badgerDir).WithReadOnly(true).WithLogger(nil))
	if err != nil {
		t.Fatalf("opening the Badger store read-only: %v", err)
	}
	err = db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			r := rec{value: string(v)}
			if exp := item.ExpiresAt(); exp > 0 {
				r.expiresAt = time.Unix(int64(exp), 0)
			}
			if fresh(r.expiresAt) {
				want[string(item.Key())] = r
			}
		}
		return nil
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]rec{}
	rows, err := pgConnect(t, dsn).Query(context.Background(), `SELECT key, value, expires_at FROM palmgate_kv`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k, v []byte
		var exp *time.Time
		if err := rows.Scan(&k, &v, &exp); err != nil {
			t.Fatal(err)
		}
		r := rec{value: string(v)}
		if exp != nil {
			r.expiresAt = *exp
		}
		if fresh(r.expiresAt) {
			got[string(k)] = r
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	withTTL := 0
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("record %q is not in PostgreSQL", k)
		case g.value != w.value:
			t.Errorf("record %q: value differs in PostgreSQL", k)
		case !g.expiresAt.Equal(w.expiresAt):
			t.Errorf("record %q expires at %v in PostgreSQL, at %v in Badger", k, g.expiresAt, w.expiresAt)
		}
		if !w.expiresAt.IsZero() {
			withTTL++
		}
		delete(got, k)
	}
	for k := range got {
		t.Errorf("record %q is in PostgreSQL only", k)
	}
	if len(want) < 20 || withTTL == 0 {
		t.Errorf("Badger held %d records, %d with a ttl: too few for this test to mean much", len(want), withTTL)
	}
	t.Logf("%d records, %d with a ttl, are the same in both stores", len(want), withTTL)
}
