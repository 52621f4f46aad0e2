package pgstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/palmgate/palmgate/internal/pgtest"
	"github.com/palmgate/palmgate/storage"
)

// TestOpenUnreachable checks that Open of a database nobody answers for fails within
// about ConnectTimeout with an error wrapping storage.ErrUnavailable that names the
// host and not the password.
func TestOpenUnreachable(t *testing.T) {
	// A closed port: connection refused.
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().(*net.TCPAddr)
	closed.Close()
	// A port that accepts connections and never answers: only the timeout ends it.
	silent := silentListener(t)
	silentAddr := silent.Addr().(*net.TCPAddr)
	for _, c := range []struct {
		name string
		port int
	}{
		{"refused", closedAddr.Port},
		{"silent", silentAddr.Port},
	} {
		t.Run(c.name, func(t *testing.T) {
			const timeout = 500 * time.Millisecond
			dsn := fmt.Sprintf("postgres://palmgate:s3cretpw@127.0.0.1:%d/palmgate?sslmode=disable", c.port)
			start := time.Now()
			s, err := Open(t.Context(), Config{DSN: dsn, ConnectTimeout: timeout})
			elapsed := time.Since(start)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			t.Logf("Open after %v: %v", elapsed, err)
			if !errors.Is(err, storage.ErrUnavailable) {
				t.Errorf("Open = %v, want storage.ErrUnavailable", err)
			}
			if want := fmt.Sprintf("127.0.0.1:%d", c.port); !strings.Contains(err.Error(), want) {
				t.Errorf("Open = %q, want the host %s named", err, want)
			}
			if strings.Contains(err.Error(), "s3cretpw") {
				t.Errorf("Open = %q names the password", err)
			}
			if elapsed > timeout+time.Second {
				t.Errorf("Open took %v, want about ConnectTimeout (%v)", elapsed, timeout)
			}
		})
	}
}

// TestDatabaseGoesAway stops the database under an open store: Update and View fail
// with storage.ErrUnavailable, promptly, and work again once it is back.
func TestDatabaseGoesAway(t *testing.T) {
	cluster := pgtest.NewCluster(t)
	cfg := config(t, cluster.DSN(t))
	cfg.ConnectTimeout = time.Second
	s := closeT(t, openT(t, cfg))
	setK := func(v string) error {
		return s.Update(t.Context(), func(tx storage.Txn) error { return tx.Set([]byte("k"), []byte(v), 0) })
	}
	getK := func() (string, error) {
		var v []byte
		err := s.View(t.Context(), func(tx storage.Txn) error {
			var err error
			v, err = tx.Get([]byte("k"))
			return err
		})
		return string(v), err
	}
	if err := setK("before"); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := setK("while down")
	if !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Update with the database down = %v, want storage.ErrUnavailable", err)
	}
	if _, err := getK(); !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("View with the database down = %v, want storage.ErrUnavailable", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Update and View took %v to fail with the database down", d)
	}
	t.Logf("with the database down: %v", err)

	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	if err := setK("after"); err != nil {
		t.Fatalf("Update after the database came back: %v", err)
	}
	if v, err := getK(); err != nil || v != "after" {
		t.Errorf("Get after the database came back = %q, %v; want %q", v, err, "after")
	}

	// The database stops in the middle of a transaction: nothing of it is committed.
	err = s.Update(t.Context(), func(tx storage.Txn) error {
		if _, err := tx.Get([]byte("k")); err != nil {
			return err
		}
		if err := cluster.Stop(); err != nil {
			t.Error(err)
		}
		return tx.Set([]byte("k"), []byte("mid-way"), 0)
	})
	if !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Update whose database stopped mid-way = %v, want storage.ErrUnavailable", err)
	}
	t.Logf("stopped mid-way: %v", err)
	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	if v, err := getK(); err != nil || v != "after" {
		t.Errorf("Get after an Update interrupted mid-way = %q, %v; want %q", v, err, "after")
	}
}

// TestStatementTimeout checks that a statement the server cancels for running too long
// (a lock held by another transaction) is reported as storage.ErrUnavailable.
func TestStatementTimeout(t *testing.T) {
	dsn := pgtest.DSN(t)
	cfg := config(t, dsn)
	cfg.StatementTimeout = 200 * time.Millisecond
	s := closeT(t, openT(t, cfg))
	if err := s.Update(t.Context(), func(tx storage.Txn) error { return tx.Set([]byte("k"), []byte("v"), 0) }); err != nil {
		t.Fatal(err)
	}
	conn := sqlConn(t, dsn)
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(t.Context(), "SELECT 1 FROM palmgate_kv WHERE key = 'k' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = s.Update(t.Context(), func(tx storage.Txn) error { return tx.Set([]byte("k"), []byte("w"), 0) })
	if !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Update blocked past the statement timeout = %v, want storage.ErrUnavailable", err)
	}
	t.Logf("after %v: %v", time.Since(start), err)
	if r := s.Stats().Retries; r != 0 {
		t.Errorf("Stats.Retries = %d after a statement timeout, want 0: a timeout is reported, not retried", r)
	}
}

// TestDatabaseGoesSilent puts a proxy that stops forwarding (a network partition, a
// frozen server: no error, no answer) between the store and the database: Update and
// View fail with storage.ErrUnavailable within the client-side bound instead of
// hanging.
func TestDatabaseGoesSilent(t *testing.T) {
	dsn := pgtest.DSN(t)
	pcfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	network, addr := "tcp", net.JoinHostPort(pcfg.Host, strconv.Itoa(int(pcfg.Port)))
	if strings.HasPrefix(pcfg.Host, "/") {
		network, addr = "unix", fmt.Sprintf("%s/.s.PGSQL.%d", pcfg.Host, pcfg.Port)
	}
	p := newFreezer(t, network, addr)
	proxied := fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=%s sslmode=disable", p.port(), pcfg.User, pcfg.Database)
	if pcfg.Password != "" {
		proxied += " password=" + pcfg.Password
	}
	cfg := config(t, proxied)
	cfg.ConnectTimeout = 300 * time.Millisecond
	cfg.StatementTimeout = 300 * time.Millisecond
	// Opening (connections, migrations) may take longer than these short bounds on
	// a loaded machine: try a few times; the test is about what follows.
	var s *Store
	for attempt := 1; s == nil; attempt++ {
		opened, err := Open(context.Background(), cfg)
		switch {
		case err == nil:
			s = closeT(t, opened)
		case attempt == 5:
			t.Fatalf("opening through the proxy, %d attempts: %v", attempt, err)
		}
	}
	set := func() error {
		return s.Update(t.Context(), func(tx storage.Txn) error { return tx.Set([]byte("k"), []byte("v"), 0) })
	}
	for attempt := 1; ; attempt++ { // as above: a slow machine, not what is tested
		err := set()
		if err == nil {
			break
		}
		if attempt == 5 {
			t.Fatal(err)
		}
	}
	p.freeze()
	bound := s.clientTimeout + 2*time.Second
	start := time.Now()
	err = set()
	if !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Update through a silent connection = %v, want storage.ErrUnavailable", err)
	}
	err = s.View(t.Context(), func(tx storage.Txn) error { _, err := tx.Get([]byte("k")); return err })
	if !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("View through a silent connection = %v, want storage.ErrUnavailable", err)
	}
	if d := time.Since(start); d > 2*bound {
		t.Errorf("Update and View took %v to fail, want each within about %v", d, bound)
	}
	t.Logf("after %v: %v", time.Since(start), err)
	start = time.Now()
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if d := time.Since(start); d > bound {
		t.Errorf("Close took %v with the database silent, want at most about %v", d, bound)
	}
}

// freezer is a TCP proxy to a database that can be made to stop forwarding.
type freezer struct {
	ln     net.Listener
	frozen chan struct{} // closed by freeze
	mu     sync.Mutex
	conns  []net.Conn
}

func newFreezer(t *testing.T, network, addr string) *freezer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln, frozen: make(chan struct{})}
	t.Cleanup(f.close)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.track(c)
			select {
			case <-f.frozen:
				continue // accepted, never answered
			default:
			}
			up, err := net.Dial(network, addr)
			if err != nil {
				c.Close()
				continue
			}
			f.track(up)
			go f.pipe(c, up)
			go f.pipe(up, c)
		}
	}()
	return f
}

func (f *freezer) port() int { return f.ln.Addr().(*net.TCPAddr).Port }

func (f *freezer) track(c net.Conn) {
	f.mu.Lock()
	f.conns = append(f.conns, c)
	f.mu.Unlock()
}

// pipe copies from src to dst until frozen, then swallows everything.
func (f *freezer) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		select {
		case <-f.frozen:
			continue
		default:
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

func (f *freezer) freeze() { close(f.frozen) }

func (f *freezer) close() {
	f.ln.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
}

// TestOpenConnectTimeoutOfDSN: a DSN's own connect_timeout bounds Open when
// Config.ConnectTimeout is unset, and the error names the timeout in force and
// where it came from; ConnectTimeout, when set, wins and is named.
func TestOpenConnectTimeoutOfDSN(t *testing.T) {
	silent := silentListener(t)
	dsn := fmt.Sprintf("postgres://palmgate@127.0.0.1:%d/palmgate?sslmode=disable&connect_timeout=1", silent.Addr().(*net.TCPAddr).Port)
	for _, c := range []struct {
		name    string
		timeout time.Duration
		want    string
	}{
		{"from the DSN", 0, "connect timeout 1s, the DSN's connect_timeout"},
		{"configured", 500 * time.Millisecond, "connect timeout 500ms)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Open(t.Context(), Config{DSN: dsn, ConnectTimeout: c.timeout})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("Open = %q, want it to name %q", err, c.want)
			}
		})
	}
}

// silentListener is a loopback port that accepts connections and never
// answers: only a timeout ends a connection to it. It closes with the test.
func silentListener(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	return ln
}
