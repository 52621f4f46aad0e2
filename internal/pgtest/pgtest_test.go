package pgtest

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) {
	if dirs := os.Getenv("PGTEST_INSTALL_DIRS"); dirs != "" {
		installDirs = dirs
	}
	Main(m)
}

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

func TestWithDatabase(t *testing.T) {
	for _, c := range []struct{ dsn, want string }{
		{"postgres://u:pw@db.example:5432/postgres?sslmode=disable", "postgres://u:pw@db.example:5432/x?sslmode=disable"},
		{"postgresql://u@h/", "postgresql://u@h/x"},
		{"host=h user=u dbname=postgres", "host=h user=u dbname=postgres dbname=x"},
	} {
		if got, err := WithDatabase(c.dsn, "x"); err != nil || got != c.want {
			t.Errorf("WithDatabase(%q) = %q, %v; want %q", c.dsn, got, err, c.want)
		}
	}
}

// TestURLAdminDSN creates a database through a URL-form admin DSN, as given in
// PALMGATE_TEST_POSTGRES, and checks the DSN returned names it.
func TestURLAdminDSN(t *testing.T) {
	c := NewCluster(t)
	admin := "postgres:///postgres?host=" + url.QueryEscape(c.dir) + "&port=5432&user=postgres&sslmode=disable"
	dsn := createDatabase(t, admin)
	var name string
	if err := connect(t, dsn).QueryRow(t.Context(), "SELECT current_database()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(name, "palmgate_test_") {
		t.Errorf("connected to database %q, want a palmgate_test_ one", name)
	}
}

// TestUnavailable checks the message given when PostgreSQL is not installed, and that
// it skips a test, or fails it under PALMGATE_REQUIRE_POSTGRES=1.
func TestUnavailable(t *testing.T) {
	if os.Getenv("PGTEST_HELPER") == "1" {
		// Run by the parent test below, in a process that finds no PostgreSQL.
		DSN(t)
		t.Fatal("DSN returned without PostgreSQL")
	}
	for _, c := range []struct {
		require  string
		wantFail bool
		want     string
	}{
		{"", false, "--- SKIP: TestUnavailable"},
		{"1", true, "--- FAIL: TestUnavailable"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestUnavailable$", "-test.v")
		cmd.Env = append(os.Environ(), "PGTEST_HELPER=1", "PATH="+t.TempDir(), EnvDSN+"=",
			EnvRequire+"="+c.require, "PGTEST_INSTALL_DIRS=/nonexistent/*")
		out, err := cmd.CombinedOutput()
		if (err != nil) != c.wantFail {
			t.Errorf("%s=%q: exit error %v, want failure %v\n%s", EnvRequire, c.require, err, c.wantFail, out)
		}
		for _, want := range []string{c.want, "initdb not found", EnvDSN} {
			if !strings.Contains(string(out), want) {
				t.Errorf("%s=%q: output lacks %q:\n%s", EnvRequire, c.require, want, out)
			}
		}
	}
}

// TestDurableCluster checks that NewClusterWith(Durable) runs a server that syncs
// its writes, that Settings reach the server, and that PID names the postmaster.
func TestDurableCluster(t *testing.T) {
	c := NewClusterWith(t, ClusterOptions{Durable: true, Settings: []string{"shared_buffers=32MB"}})
	if pid := c.PID(); pid <= 0 {
		t.Fatalf("PID() = %d for a running cluster", pid)
	} else if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
		t.Fatalf("PID() = %d: %v", pid, err)
	}
	conn := connect(t, c.DSN(t))
	for setting, want := range map[string]string{
		"fsync": "on", "full_page_writes": "on", "synchronous_commit": "on", "shared_buffers": "32MB",
	} {
		var got string
		if err := conn.QueryRow(t.Context(), "SHOW "+setting).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s = %s, want %s", setting, got, want)
		}
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if pid := c.PID(); pid != 0 {
		t.Errorf("PID() = %d for a stopped cluster", pid)
	}
}
