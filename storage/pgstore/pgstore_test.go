package pgstore

import (
	"context"
	"errors"
	"fmt"
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
