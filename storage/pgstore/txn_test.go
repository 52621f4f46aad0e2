package pgstore

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/pgtest"
	"github.com/palmgate/palmgate/storage"
)

// TestRoundTrips pins how many round trips typical transactions cost: the BEGIN
// goes with the first statement, Gets of prefetched or written keys stay in the
// instance, and the writes go with the COMMIT (or with an Iterate that must see
// them).
func TestRoundTrips(t *testing.T) {
	s := closeT(t, openT(t, config(t, pgtest.DSN(t))))
	key := func(k string) []byte { return []byte(k) }
	if err := s.Update(t.Context(), func(tx storage.Txn) error { return tx.Set(key("r/a"), []byte("a"), 0) }); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		view bool
		fn   func(storage.Txn) error
		want uint64
	}{
		{"write only: BEGIN, writes, COMMIT", false, func(tx storage.Txn) error {
			tx.Set(key("r/b"), []byte("b"), 0)
			tx.Set(key("r/c"), []byte("c"), time.Hour)
			return tx.Delete(key("r/d"))
		}, 1},
		{"prefetch, gets, writes", false, func(tx storage.Txn) error {
			if err := storage.Prefetch(tx, key("r/a"), key("r/b"), key("r/missing")); err != nil {
				return err
			}
			for _, k := range []string{"r/a", "r/b", "r/missing"} {
				if _, err := tx.Get(key(k)); err != nil && err != storage.ErrNotFound {
					return err
				}
			}
			tx.Set(key("r/e"), []byte("e"), 0)
			if _, err := tx.Get(key("r/e")); err != nil { // its own write
				return err
			}
			return tx.Delete(key("r/b"))
		}, 2},
		{"get, then an iterate over a written key", false, func(tx storage.Txn) error {
			if _, err := tx.Get(key("r/a")); err != nil {
				return err
			}
			tx.Set(key("r/f"), []byte("f"), 0)
			return tx.IterateKeys(key("r/"), func([]byte) (bool, error) { return true, nil })
		}, 3},
		{"view with one get", true, func(tx storage.Txn) error {
			_, err := tx.Get(key("r/a"))
			return err
		}, 2},
		{"nothing", false, func(storage.Txn) error { return nil }, 0},
	} {
		before := s.roundTrips.Load()
		var err error
		if c.view {
			err = s.View(t.Context(), c.fn)
		} else {
			err = s.Update(t.Context(), c.fn)
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := s.roundTrips.Load() - before; got != c.want {
			t.Errorf("%s: %d round trips, want %d", c.name, got, c.want)
		}
	}
	before := s.roundTrips.Load()
	if v, err := storage.ReadKey(t.Context(), s, key("r/a")); err != nil || string(v) != "a" {
		t.Errorf("ReadKey(r/a) = %q, %v", v, err)
	}
	if got := s.roundTrips.Load() - before; got != 1 {
		t.Errorf("ReadKey: %d round trips, want 1", got)
	}
	var got []string
	err := s.View(t.Context(), func(tx storage.Txn) error {
		return tx.Iterate(key("r/"), func(k, v []byte) (bool, error) {
			got = append(got, string(k)+"="+string(v))
			return true, nil
		})
	})
	if want := "r/a=a r/c=c r/e=e r/f=f"; err != nil || strings.Join(got, " ") != want {
		t.Errorf("records = %v, %v; want %s", got, err, want)
	}
}

// TestFirstRoundTripReconnects checks that a transaction whose pooled connection
// was closed by the server (a restart, an idle timeout) is begun on another one
// without troubling fn, and that a View still runs fn once.
func TestFirstRoundTripReconnects(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := closeT(t, openT(t, config(t, dsn)))
	if err := s.Update(t.Context(), func(tx storage.Txn) error { return tx.Set([]byte("k"), []byte("v"), 0) }); err != nil {
		t.Fatal(err)
	}
	conn := sqlConn(t, dsn)
	terminate := func() {
		t.Helper()
		var n int
		if err := conn.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE application_name = 'palmgate' AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatal("no pooled connection to terminate")
		}
		for deadline := time.Now().Add(30 * time.Second); ; { // ends as soon as they are gone
			var left int
			if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'palmgate'`).Scan(&left); err != nil {
				t.Fatal(err)
			}
			if left == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d terminated backends still running", left)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	terminate()
	retries := s.Stats().Retries
	runs := 0
	err := s.View(t.Context(), func(tx storage.Txn) error {
		runs++
		v, err := tx.Get([]byte("k"))
		if err == nil && string(v) != "v" {
			t.Errorf("Get = %q, want v", v)
		}
		return err
	})
	if err != nil || runs != 1 {
		t.Errorf("View on a terminated connection = %v, fn ran %d times; want nil, once", err, runs)
	}
	if s.Stats().Retries == retries {
		t.Error("the View did not meet the terminated connection (Stats.Retries unchanged); the test proves nothing")
	}
	terminate()
	retries = s.Stats().Retries
	if v, err := storage.ReadKey(t.Context(), s, []byte("k")); err != nil || string(v) != "v" {
		t.Errorf("ReadKey on a terminated connection = %q, %v; want v", v, err)
	}
	if s.Stats().Retries == retries {
		t.Error("ReadKey did not meet the terminated connection (Stats.Retries unchanged)")
	}
	terminate()
	if err := s.Update(t.Context(), func(tx storage.Txn) error {
		if _, err := tx.Get([]byte("k")); err != nil {
			return err
		}
		return tx.Set([]byte("k"), []byte("w"), 0)
	}); err != nil {
		t.Errorf("Update on a terminated connection: %v", err)
	}
}

// TestUpgradeRebuildsHashIndex upgrades a database with records from schema 3:
// migration 4 rebuilds the hash index with its new fill factor, and every record
// is still read through it.
func TestUpgradeRebuildsHashIndex(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := openT(t, config(t, dsn))
	if err := s.Update(t.Context(), func(tx storage.Txn) error {
		for i := range 2000 {
			if err := tx.Set(fmt.Appendf(nil, "u/%04d", i), []byte("v"), 0); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	conn := sqlConn(t, dsn)
	if _, err := conn.Exec(t.Context(), `ALTER INDEX palmgate_kv_key_hash RESET (fillfactor);
REINDEX INDEX palmgate_kv_key_hash; UPDATE palmgate_schema SET version = 3`); err != nil {
		t.Fatal(err)
	}
	s = closeT(t, openT(t, config(t, dsn)))
	if s.migrated != 1 {
		t.Errorf("Open of a schema 3 database applied %d steps, want 1", s.migrated)
	}
	var options []string
	if err := conn.QueryRow(t.Context(), `SELECT reloptions FROM pg_class WHERE relname = 'palmgate_kv_key_hash'`).Scan(&options); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(options, "fillfactor=25") {
		t.Errorf("hash index options after the upgrade %v, want fillfactor=25", options)
	}
	for _, k := range []string{"u/0000", "u/1234", "u/1999"} {
		if v, err := storage.ReadKey(t.Context(), s, []byte(k)); err != nil || string(v) != "v" {
			t.Errorf("ReadKey(%s) after the upgrade = %q, %v", k, v, err)
		}
	}
}

// TestCommitOfAbortedTransaction: should the server's transaction have failed
// without pgstore seeing the error, its COMMIT ends in ROLLBACK with no error;
// the Update must report that nothing was committed.
func TestCommitOfAbortedTransaction(t *testing.T) {
	cfg := config(t, pgtest.DSN(t))
	cfg.MaxConns = 1 // one connection, on which the statements below are prepared
	s := closeT(t, openT(t, cfg))
	if err := s.Update(t.Context(), func(tx storage.Txn) error { return tx.Set([]byte("b"), []byte("v"), 0) }); err != nil {
		t.Fatal(err)
	}
	err := s.Update(t.Context(), func(st storage.Txn) error {
		tx := st.(*txn)
		if err := tx.Set([]byte("a"), []byte("v"), 0); err != nil {
			return err
		}
		// The write is sent with the scan, so that the COMMIT goes alone.
		if err := tx.IterateKeys([]byte("a"), func([]byte) (bool, error) { return true, nil }); err != nil {
			return err
		}
		// A failure behind the txn's back: the server's transaction is aborted.
		if _, err := tx.conn.Exec(t.Context(), "SELECT 1/0"); err == nil {
			t.Error("SELECT 1/0 succeeded")
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "nothing was committed") {
		t.Errorf("Update whose server transaction had failed = %v, want the COMMIT's ROLLBACK reported", err)
	}
	if _, err := storage.ReadKey(t.Context(), s, []byte("a")); err != storage.ErrNotFound {
		t.Errorf("ReadKey(a) = %v, want storage.ErrNotFound", err)
	}
}
