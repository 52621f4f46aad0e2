package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

// TestDSNIsolated checks that each DSN names a new, empty, writable database.
func TestDSNIsolated(t *testing.T) {
	ctx := t.Context()
	a, b := DSN(t), DSN(t)
	if a == b {
		t.Fatalf("DSN returned %q twice", a)
	}
	ca := connect(t, a)
	if _, err := ca.Exec(ctx, "CREATE TABLE t (x int)"); err != nil {
		t.Fatal(err)
	}
	cb := connect(t, b)
	var n int
	if err := cb.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 't'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("a table created in one test database is visible in another")
	}
}

// TestClusterStopStart checks that a private cluster refuses connections while
// stopped and keeps committed data across a restart.
func TestClusterStopStart(t *testing.T) {
	c := NewCluster(t)
	dsn := c.DSN(t)
	conn := connect(t, dsn)
	if _, err := conn.Exec(t.Context(), "CREATE TABLE t (x int); INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.Connect(t.Context(), dsn); err == nil {
		t.Fatal("connected to a stopped cluster")
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	var x int
	if err := connect(t, dsn).QueryRow(t.Context(), "SELECT x FROM t").Scan(&x); err != nil || x != 42 {
		t.Fatalf("after restart: x = %d, %v; want 42", x, err)
	}
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
