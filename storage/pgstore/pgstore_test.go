package pgstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/palmgate/palmgate/internal/pgtest"
	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/storagetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// config returns a Config for dsn that logs warnings to t.
func config(t testing.TB, dsn string) Config {
	return Config{DSN: dsn, Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))}
}

func openT(t testing.TB, cfg Config) *Store {
	t.Helper()
	s, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// closeT closes s when t ends.
func closeT(t testing.TB, s *Store) *Store {
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// sqlConn is a direct connection to dsn, to look at the tables behind a store's back.
func sqlConn(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store { return openT(t, config(t, pgtest.DSN(t))) })
	t.Run("Reopen", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		storagetest.RunReopen(t, func(t *testing.T) storage.Store { return openT(t, config(t, dsn)) })
	})
	storagetest.RunInstances(t, func(t *testing.T) (storage.Store, storage.Store) {
		dsn := pgtest.DSN(t)
		return openT(t, config(t, dsn)), openT(t, config(t, dsn))
	})
}

func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct{ prefix, want string }{
		{"", ""},
		{"a", "b"},
		{"p/", "p0"},
		{"a\xff", "b"},
		{"a\xff\xff", "b"},
		{"\xff", ""},
		{"\xff\xff\xff", ""},
		{"a\x00", "a\x01"},
	} {
		got := prefixEnd([]byte(c.prefix))
		if c.want == "" && got != nil || string(got) != c.want {
			t.Errorf("prefixEnd(%q) = %q, want %q", c.prefix, got, c.want)
		}
	}
}

// TestIterateEdges checks prefixes of 0xFF bytes (no upper bound), iterations longer
// than one page, and a Get from inside an Iterate callback.
func TestIterateEdges(t *testing.T) {
	s := closeT(t, openT(t, config(t, pgtest.DSN(t))))
	ctx := t.Context()
	const n = 3*maxPage + 7 // several pages of every size
	err := s.Update(ctx, func(tx storage.Txn) error {
		for _, k := range []string{"\xfe", "\xff", "\xff\x00", "\xff\xff", "\xff\xff\xff", "\xfe\xff"} {
			if err := tx.Set([]byte(k), []byte("v"+k), 0); err != nil {
				return err
			}
		}
		for i := range n {
			if err := tx.Set(fmt.Appendf(nil, "many/%05d", i), []byte(strconv.Itoa(i)), 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	keys := func(prefix string) []string {
		var got []string
		err := s.View(ctx, func(tx storage.Txn) error {
			return tx.IterateKeys([]byte(prefix), func(k []byte) (bool, error) {
				got = append(got, string(k))
				return true, nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got, want := keys("\xff"), []string{"\xff", "\xff\x00", "\xff\xff", "\xff\xff\xff"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("IterateKeys(\\xff) = %q, want %q", got, want)
	}
	if got, want := keys("\xff\xff"), []string{"\xff\xff", "\xff\xff\xff"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("IterateKeys(\\xff\\xff) = %q, want %q", got, want)
	}
	if got, want := keys("\xfe"), []string{"\xfe", "\xfe\xff"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("IterateKeys(\\xfe) = %q, want %q", got, want)
	}
	i := 0
	err = s.View(ctx, func(tx storage.Txn) error {
		return tx.Iterate([]byte("many/"), func(k, v []byte) (bool, error) {
			if want := fmt.Sprintf("many/%05d", i); string(k) != want || string(v) != strconv.Itoa(i) {
				return false, fmt.Errorf("record %d is %q=%q, want %q=%d", i, k, v, want, i)
			}
			// The transaction stays usable inside the callback.
			if got, err := tx.Get(k); err != nil || string(got) != string(v) {
				return false, fmt.Errorf("Get(%q) inside Iterate = %q, %v", k, got, err)
			}
			i++
			return true, nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if i != n {
		t.Errorf("Iterate visited %d records, want %d", i, n)
	}
}

// TestConflictRetry has many goroutines increment one counter, with as many
// connections as goroutines so that their transactions really overlap: no increment
// may be lost, none may fail, and the serialization failures must have been retried.
func TestConflictRetry(t *testing.T) {
	const workers, perWorker = 16, 25
	cfg := config(t, pgtest.DSN(t))
	cfg.MaxConns = workers
	s := closeT(t, openT(t, cfg))
	// Hold each transaction open a moment between its read and its write, so that
	// concurrent ones read the same value.
	slowIncrement := func(tx storage.Txn) error {
		v, err := tx.Get([]byte("counter"))
		n := 0
		switch {
		case errors.Is(err, storage.ErrNotFound):
		case err != nil:
			return err
		default:
			if n, err = strconv.Atoi(string(v)); err != nil {
				return err
			}
		}
		time.Sleep(time.Millisecond)
		return tx.Set([]byte("counter"), []byte(strconv.Itoa(n+1)), 0)
	}
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range workers {
		wg.Go(func() {
			for range perWorker {
				if err := s.Update(t.Context(), slowIncrement); err != nil {
					if failed.Add(1) == 1 {
						t.Errorf("Update: %v", err)
					}
					return
				}
			}
		})
	}
	wg.Wait()
	var got string
	err := s.View(t.Context(), func(tx storage.Txn) error {
		v, err := tx.Get([]byte("counter"))
		got = string(v)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.Itoa(workers * perWorker); got != want {
		t.Errorf("counter = %s after %d increments (%d Updates failed)", got, workers*perWorker, failed.Load())
	}
	st := s.Stats()
	t.Logf("stats: %+v", st)
	if st.Retries == 0 {
		t.Error("no Update was retried: the transactions never conflicted, so the test tests nothing")
	}
	if st.Conflicts != 0 {
		t.Errorf("Stats.Conflicts = %d, want 0", st.Conflicts)
	}
}

// TestRetryDespiteSwallowedError checks that a transaction whose statement failed
// with a serialization failure is retried even when fn ignores the error.
func TestRetryDespiteSwallowedError(t *testing.T) {
	cfg := config(t, pgtest.DSN(t))
	s := closeT(t, openT(t, cfg))
	s.noGroups = true // two transactions at once, not one group's turn after the other's
	// Two transactions that each read both keys and write one: under SERIALIZABLE
	// one must fail (write skew), whatever its fn does with the error.
	// Both first runs read before either writes: each says so on read, and
	// waits for ready, which opens once both have read (not after a fixed time,
	// which a loaded machine may overrun).
	ready := make(chan struct{})
	read := make(chan struct{}, 2)
	var runs atomic.Int64
	skew := func(write string) func(storage.Txn) error {
		return func(tx storage.Txn) error {
			n := runs.Add(1)
			tx.Get([]byte("a"))
			tx.Get([]byte("b"))
			if n <= 2 {
				read <- struct{}{}
				select {
				case <-ready:
				case <-time.After(time.Minute): // only if the other never reads
				}
			}
			tx.Set([]byte(write), []byte("x"), 0) // error ignored on purpose
			return nil
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, k := range []string{"a", "b"} {
		wg.Go(func() { errs[i] = s.Update(t.Context(), skew(k)) })
	}
	for range 2 {
		select {
		case <-read:
		case <-time.After(time.Minute):
			t.Error("the two transactions did not both read within a minute")
		}
	}
	close(ready)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Errorf("Update: %v", err)
		}
	}
	if runs.Load() < 3 {
		t.Errorf("fn ran %d times in all, want a retry (at least 3): write skew went undetected", runs.Load())
	}
}

// TestSweep checks that the sweeper physically deletes expired records, in batches of
// at most SweepBatch, and leaves live ones.
func TestSweep(t *testing.T) {
	dsn := pgtest.DSN(t)
	cfg := config(t, dsn)
	cfg.SweepBatch = 10
	cfg.SweepInterval = 50 * time.Millisecond
	var mu sync.Mutex
	var batches []int64
	s, err := open(t.Context(), cfg, func(n int64) {
		mu.Lock()
		batches = append(batches, n)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	closeT(t, s)
	const expiring, kept = 35, 5
	err = s.Update(t.Context(), func(tx storage.Txn) error {
		for i := range expiring {
			if err := tx.Set(fmt.Appendf(nil, "exp/%02d", i), []byte("v"), 100*time.Millisecond); err != nil {
				return err
			}
		}
		for i := range kept {
			if err := tx.Set(fmt.Appendf(nil, "kept/%d", i), []byte("v"), time.Hour); err != nil {
				return err
			}
			if err := tx.Set(fmt.Appendf(nil, "forever/%d", i), []byte("v"), 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	conn := sqlConn(t, dsn)
	rows := func() int {
		var n int
		if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM palmgate_kv").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// The expiring rows live 100 ms: on a busy machine the sweeper may have taken
	// some or all of them before this count, so it is bounded, not exact; the sum
	// of the sweeper's batches below proves that every one was written and swept.
	if n := rows(); n < 2*kept || n > expiring+2*kept {
		t.Fatalf("%d rows after the writes, want %d to %d", n, 2*kept, expiring+2*kept)
	}
	deadline := time.Now().Add(10 * time.Second)
	for rows() != 2*kept {
		if time.Now().After(deadline) {
			t.Fatalf("%d rows 10s after the records expired, want %d: the sweeper did not delete them", rows(), 2*kept)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var live int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM palmgate_kv WHERE key >= 'kept/' OR key >= 'forever/' AND key < 'forever0'").Scan(&live); err != nil {
		t.Fatal(err)
	}
	if live != 2*kept {
		t.Errorf("%d live rows left, want %d", live, 2*kept)
	}
	mu.Lock()
	defer mu.Unlock()
	var sum int64
	for _, n := range batches {
		if n > int64(cfg.SweepBatch) {
			t.Errorf("a sweep batch deleted %d records, more than SweepBatch (%d)", n, cfg.SweepBatch)
		}
		sum += n
	}
	if sum != expiring {
		t.Errorf("sweep batches %v deleted %d records in all, want %d", batches, sum, expiring)
	}
	if got := s.Stats().Swept; got != expiring {
		t.Errorf("Stats.Swept = %d, want %d", got, expiring)
	}
}

// TestSweepSparesRecordSetAgain checks that a record set again without a ttl after it
// expired is not swept.
func TestSweepSparesRecordSetAgain(t *testing.T) {
	cfg := config(t, pgtest.DSN(t))
	cfg.SweepInterval = -1
	s := closeT(t, openT(t, cfg))
	set := func(ttl time.Duration) {
		if err := s.Update(t.Context(), func(tx storage.Txn) error { return tx.Set([]byte("k"), []byte("v"), ttl) }); err != nil {
			t.Fatal(err)
		}
	}
	set(time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	set(0)
	s.sweep(t.Context())
	err := s.View(t.Context(), func(tx storage.Txn) error { _, err := tx.Get([]byte("k")); return err })
	if err != nil {
		t.Errorf("Get after sweeping a record set again without ttl: %v", err)
	}
}

// TestMigrateConcurrently opens several stores on an empty database at once: all
// succeed and each schema step is applied once.
func TestMigrateConcurrently(t *testing.T) {
	dsn := pgtest.DSN(t)
	const n = 4
	stores := make([]*Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = Open(t.Context(), config(t, dsn))
		})
	}
	close(start)
	wg.Wait()
	applied := 0
	for i := range n {
		if errs[i] != nil {
			t.Errorf("Open %d: %v", i, errs[i])
			continue
		}
		applied += stores[i].migrated
		closeT(t, stores[i])
	}
	if applied != len(migrations) {
		t.Errorf("the %d Opens applied %d schema steps in all, want %d (each once)", n, applied, len(migrations))
	}
	var version int
	if err := sqlConn(t, dsn).QueryRow(t.Context(), "SELECT version FROM palmgate_schema WHERE id = 1").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != len(migrations) {
		t.Errorf("schema version %d, want %d", version, len(migrations))
	}
	// A store on the migrated database works, and a second Open applies nothing.
	s := closeT(t, openT(t, config(t, dsn)))
	if s.migrated != 0 {
		t.Errorf("Open of an up-to-date database applied %d steps", s.migrated)
	}
}

// TestSchemaTooNew checks that Open refuses a database migrated by a newer palmgate.
func TestSchemaTooNew(t *testing.T) {
	dsn := pgtest.DSN(t)
	openT(t, config(t, dsn)).Close()
	if _, err := sqlConn(t, dsn).Exec(t.Context(), "UPDATE palmgate_schema SET version = 999"); err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.Context(), config(t, dsn))
	if err == nil {
		s.Close()
		t.Fatal("Open of a database at schema version 999 succeeded")
	}
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Errorf("Open = %v, want ErrSchemaTooNew", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "999") || !strings.Contains(msg, strconv.Itoa(len(migrations))) {
		t.Errorf("Open = %q, want both versions (999 and %d) named", msg, len(migrations))
	}
}

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
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
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

func TestCloseIdempotentAndUseAfterClose(t *testing.T) {
	storagetest.RunClosed(t, func(t *testing.T) storage.Store { return openT(t, config(t, pgtest.DSN(t))) }, ErrClosed)
}

func TestCanceledContext(t *testing.T) {
	s := closeT(t, openT(t, config(t, pgtest.DSN(t))))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	called := false
	fn := func(storage.Txn) error { called = true; return nil }
	if err := s.Update(ctx, fn); !errors.Is(err, context.Canceled) || errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Update with canceled ctx = %v, want context.Canceled (and not ErrUnavailable)", err)
	}
	if err := s.View(ctx, fn); !errors.Is(err, context.Canceled) || errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("View with canceled ctx = %v, want context.Canceled (and not ErrUnavailable)", err)
	}
	if called {
		t.Error("fn ran despite the canceled context")
	}
}

// TestOpenBadDSN checks that a DSN that does not parse is an error that does not
// repeat the password, and that is not mistaken for an unavailable database.
func TestOpenBadDSN(t *testing.T) {
	for _, dsn := range []string{
		"",
		"postgres://u:s3cretpw@db.example:99999/palmgate",
		"postgres://u:s3cretpw@db.example/palmgate?sslmode=bogus",
		"host=db.example password=s3cretpw port=abc",
	} {
		s, err := Open(t.Context(), Config{DSN: dsn})
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", dsn)
			continue
		}
		if strings.Contains(err.Error(), "s3cretpw") {
			t.Errorf("Open(%q) = %q names the password", dsn, err)
		}
		if errors.Is(err, storage.ErrUnavailable) {
			t.Errorf("Open(%q) = %v, wrapping storage.ErrUnavailable", dsn, err)
		}
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

// TestConfigErrors checks that each invalid option is refused, named, before any
// connection is attempted.
func TestConfigErrors(t *testing.T) {
	const dsn = "postgres://u@127.0.0.1:1/db"
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no DSN", Config{}, "no DSN"},
		{"MaxConns", Config{DSN: dsn, MaxConns: -1}, "MaxConns"},
		{"StatementTimeout", Config{DSN: dsn, StatementTimeout: -time.Second}, "StatementTimeout"},
		{"ConnectTimeout", Config{DSN: dsn, ConnectTimeout: -time.Second}, "ConnectTimeout"},
		{"SweepBatch", Config{DSN: dsn, SweepBatch: -1}, "SweepBatch"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Open(t.Context(), c.cfg)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), c.want) || errors.Is(err, storage.ErrUnavailable) {
				t.Errorf("Open = %v, want an error naming %s (and not ErrUnavailable)", err, c.want)
			}
		})
	}
	pcfg, err := poolConfig(Config{DSN: dsn, StatementTimeout: 100 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	if got := pcfg.ConnConfig.RuntimeParams["statement_timeout"]; got != "1" {
		t.Errorf("statement_timeout for a 100µs StatementTimeout = %q, want 1 (ms), not 0 (no timeout)", got)
	}
}

// TestGiveUp checks that an Update still conflicting after the last attempt returns
// an error wrapping storage.ErrConflict, and commits nothing.
func TestGiveUp(t *testing.T) {
	cfg := config(t, pgtest.DSN(t))
	cfg.MaxConns = 8
	s := closeT(t, openT(t, cfg))
	s.maxAttempts = 2
	var wg sync.WaitGroup
	var ok, conflicted atomic.Int64
	for range 8 {
		wg.Go(func() {
			for range 10 {
				err := s.Update(t.Context(), func(tx storage.Txn) error {
					v, err := tx.Get([]byte("n"))
					if err != nil && !errors.Is(err, storage.ErrNotFound) {
						return err
					}
					time.Sleep(2 * time.Millisecond)
					return tx.Set([]byte("n"), append(v, 'x'), 0)
				})
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, storage.ErrConflict):
					conflicted.Add(1)
				default:
					t.Errorf("Update: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if conflicted.Load() == 0 {
		t.Fatal("no Update gave up after 2 attempts: the test did not make them conflict")
	}
	if got := s.Stats().Conflicts; got != uint64(conflicted.Load()) {
		t.Errorf("Stats.Conflicts = %d, want %d", got, conflicted.Load())
	}
	var n []byte
	if err := s.View(t.Context(), func(tx storage.Txn) error { var err error; n, err = tx.Get([]byte("n")); return err }); err != nil {
		t.Fatal(err)
	}
	if int64(len(n)) != ok.Load() {
		t.Errorf("%d Updates succeeded but the value records %d: one that gave up committed", ok.Load(), len(n))
	}
}

// TestOpenMissingDatabase checks that a database that does not exist is a
// configuration error naming the host, not storage.ErrUnavailable.
func TestOpenMissingDatabase(t *testing.T) {
	dsn, err := pgtest.WithDatabase(pgtest.DSN(t), "palmgate_no_such_db")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.Context(), config(t, dsn))
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded")
	}
	if errors.Is(err, storage.ErrUnavailable) || !strings.Contains(err.Error(), "palmgate_no_such_db") {
		t.Errorf("Open = %v, want an error naming the database, not wrapping storage.ErrUnavailable", err)
	}
}

// TestWarnsWithoutSynchronousCommit checks that Open warns when the database answers
// commits before they are on disk.
func TestWarnsWithoutSynchronousCommit(t *testing.T) {
	dsn := pgtest.DSN(t)
	var name string
	conn := sqlConn(t, dsn)
	if err := conn.QueryRow(t.Context(), "SELECT current_database()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		setting  string
		wantWarn bool
	}{{"on", false}, {"off", true}} {
		if _, err := conn.Exec(t.Context(), "ALTER DATABASE "+name+" SET synchronous_commit = "+c.setting); err != nil {
			t.Fatal(err)
		}
		core, logs := observer.New(zap.WarnLevel)
		s, err := Open(t.Context(), Config{DSN: dsn, Logger: zap.New(core)})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		warned := logs.FilterMessageSnippet("synchronous_commit off").Len() > 0
		if warned != c.wantWarn {
			t.Errorf("synchronous_commit=%s: warned %v, want %v (logs: %v)", c.setting, warned, c.wantWarn, logs.All())
		}
	}
}

// TestQueuedWrites checks the deferred writes of a transaction: reads see the
// writes queued before them (point reads and iteration), a slice passed to Set
// may be reused at once, a write fn makes before returning an error is never
// sent, and a queued write that fails fails the Update with nothing committed.
func TestQueuedWrites(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := closeT(t, openT(t, config(t, dsn)))
	ctx := t.Context()
	err := s.Update(ctx, func(tx storage.Txn) error {
		buf := []byte("q/1")
		val := []byte("one")
		if err := tx.Set(buf, val, 0); err != nil {
			return err
		}
		buf[2], val[0] = '9', 'X' // reused by the caller
		if err := tx.Set([]byte("q/2"), []byte("two"), time.Hour); err != nil {
			return err
		}
		if v, err := tx.Get([]byte("q/1")); err != nil || string(v) != "one" {
			return fmt.Errorf("Get after a queued Set = %q, %v", v, err)
		}
		if err := tx.Delete([]byte("q/2")); err != nil {
			return err
		}
		if err := tx.Set([]byte("q/3"), nil, 0); err != nil {
			return err
		}
		var keys []string
		if err := tx.IterateKeys([]byte("q/"), func(k []byte) (bool, error) { keys = append(keys, string(k)); return true, nil }); err != nil {
			return err
		}
		if strings.Join(keys, ",") != "q/1,q/3" {
			return fmt.Errorf("IterateKeys after queued writes = %v, want q/1,q/3", keys)
		}
		return tx.Set([]byte("q/4"), []byte("four"), 0) // sent before the commit
	})
	if err != nil {
		t.Fatal(err)
	}
	conn := sqlConn(t, dsn)
	var got string
	if err := conn.QueryRow(ctx, `SELECT string_agg(convert_from(key, 'UTF8') || '=' || convert_from(value, 'UTF8'), ',' ORDER BY key) FROM palmgate_kv`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if want := "q/1=one,q/3=,q/4=four"; got != want {
		t.Errorf("committed %q, want %q", got, want)
	}

	errFn := errors.New("fn fails")
	err = s.Update(ctx, func(tx storage.Txn) error {
		tx.Set([]byte("q/5"), []byte("five"), 0)
		return errFn
	})
	if !errors.Is(err, errFn) {
		t.Errorf("Update whose fn fails = %v, want fn's error", err)
	}
	// A NULL key violates the primary key: the queued write fails at the end.
	err = s.Update(ctx, func(tx storage.Txn) error {
		if err := tx.Set([]byte("q/6"), []byte("six"), 0); err != nil {
			return err
		}
		return tx.Set(nil, []byte("bad"), 0)
	})
	if err == nil {
		t.Error("Update with a failing queued write succeeded")
	}
	t.Logf("failing queued write: %v", err)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM palmgate_kv WHERE key IN ('q/5', 'q/6')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d records of failed Updates were committed", n)
	}
}

// BenchmarkUpdate measures one Update shaped like a registration's first step
// (four point reads of missing keys, a prefix scan, five writes) on one
// connection after another: its latency is mostly round trips.
func BenchmarkUpdate(b *testing.B) {
	s := closeT(b, openT(b, config(b, pgtest.DSN(b))))
	ctx := context.Background()
	var n int
	for b.Loop() {
		n++
		err := s.Update(ctx, func(tx storage.Txn) error {
			for _, k := range []string{"r/", "d/", "k/", "g/"} {
				if _, err := tx.Get(fmt.Appendf(nil, "%s%d", k, n)); !errors.Is(err, storage.ErrNotFound) {
					return fmt.Errorf("get: %v", err)
				}
			}
			if err := tx.Set(fmt.Appendf(nil, "g/%d", n), nil, time.Hour); err != nil {
				return err
			}
			if err := tx.IterateKeys(fmt.Appendf(nil, "p/%d/", n), func([]byte) (bool, error) { return true, nil }); err != nil {
				return err
			}
			for _, k := range []string{"p/%d/s", "r/%d", "s/%d", "c/%d"} {
				if err := tx.Set(fmt.Appendf(nil, k, n), []byte("value"), time.Hour); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// TestPointReadsUseHashIndex: Get's query is planned on the hash index of the keys
// (migration 3), so that a serializable transaction's read of an absent key
// holds a predicate lock on a hash bucket, not on the B-tree page into which
// concurrent transactions insert neighbouring keys (which made most pairs of
// concurrent registrations conflict).
func TestPointReadsUseHashIndex(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := closeT(t, openT(t, config(t, dsn)))
	// Enough records for the B-tree to tempt the planner: with 5000 of them it
	// plans key = ANY($1) on the B-tree.
	if err := s.Update(t.Context(), func(tx storage.Txn) error {
		for i := range 5000 {
			if err := tx.Set([]byte(fmt.Sprintf("agent/d/device-%04d", i)), []byte(strings.Repeat("v", 200)), 0); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	conn := sqlConn(t, dsn)
	// Between the two indexes, the planner must prefer the hash one, with the
	// parameters' values (a custom plan) and without (a generic one, which a
	// statement prepared by pgx gets after five runs).
	if _, err := conn.Exec(t.Context(), "ANALYZE palmgate_kv"); err != nil {
		t.Fatal(err)
	}
	var options []string
	if err := conn.QueryRow(t.Context(), `SELECT reloptions FROM pg_class WHERE relname = 'palmgate_kv_key_hash'`).Scan(&options); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(options, "fillfactor=25") {
		t.Errorf("hash index options %v, want fillfactor=25 (migration 4)", options)
	}
	keys := [][]byte{[]byte("agent/d/device-0077"), []byte("agent/d/device-0078")}
	for _, c := range []struct {
		name, sql, settings string
		arg                 any
	}{
		{"Get", sqlGet, "auto", keys[0]},
		{"Get", sqlGet, "force_generic_plan", keys[0]},
		{"Prefetch", sqlGetMany, "auto", keys},
		{"Prefetch", sqlGetMany, "force_generic_plan", keys},
		{"Delete", sqlDelete, "auto", keys},
		{"Delete", sqlDelete, "force_generic_plan", keys},
	} {
		if _, err := conn.Exec(t.Context(), "SET plan_cache_mode = "+c.settings); err != nil {
			t.Fatal(err)
		}
		rows, err := conn.Query(t.Context(), "EXPLAIN "+c.sql, c.arg)
		if err != nil {
			t.Fatal(err)
		}
		var plan strings.Builder
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(line + "\n")
		}
		if !strings.Contains(plan.String(), "palmgate_kv_key_hash") {
			t.Errorf("%s's plan (plan_cache_mode %s) does not use the hash index:\n%s", c.name, c.settings, plan.String())
		}
	}
}
