package pgstore

import (
	"crypto/rand"
	"errors"
	"maps"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/palmgate/palmgate/internal/pgtest"
	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/storagetest"
)

// observedConfig is config(t, dsn) reporting to a new Recorder.
func observedConfig(t *testing.T, dsn string) (Config, *storagetest.Recorder) {
	rec := &storagetest.Recorder{}
	cfg := config(t, dsn)
	cfg.Observer = rec
	return cfg, rec
}

// TestObserverOperations: each Update, View and ReadKey is one duration of its op,
// a failed one too, and a lone Update is a group of one.
func TestObserverOperations(t *testing.T) {
	cfg, rec := observedConfig(t, pgtest.DSN(t))
	s := closeT(t, openT(t, cfg))
	rec.Reset() // Open's own statements are not operations, but be sure
	if err := s.Update(t.Context(), func(tx storage.Txn) error { return tx.Set([]byte("k"), []byte("v"), 0) }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadKey(t.Context(), []byte("missing")); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("ReadKey: %v", err)
	}
	if err := s.View(t.Context(), func(tx storage.Txn) error { _, err := tx.Get([]byte("k")); return err }); err != nil {
		t.Fatal(err)
	}
	for _, op := range []storage.Op{storage.OpUpdate, storage.OpView, storage.OpReadKey} {
		d := rec.Ops(op)
		if len(d) != 1 || d[0] <= 0 {
			t.Errorf("%s durations %v, want one", op, d)
		}
	}
	if got := rec.Groups(); !slices.Equal(got, []int{1}) {
		t.Errorf("group sizes %v, want [1]", got)
	}
	if got := rec.Retries(); got != 0 {
		t.Errorf("%d conflict retries, want 0", got)
	}
}

// TestObserverConflictRetry: an Update whose transaction meets a serialization
// failure counts one retry, whether it ran in the group's turn (grouped commits
// on) or on its own. The other writer is another store on the same database (as
// another instance would be), so that it does not wait for this one's turn.
func TestObserverConflictRetry(t *testing.T) {
	for _, noGroups := range []bool{false, true} {
		t.Run(map[bool]string{false: "grouped", true: "alone"}[noGroups], func(t *testing.T) {
			dsn := pgtest.DSN(t)
			cfg, rec := observedConfig(t, dsn)
			cfg.NoGroupCommits = noGroups
			s := closeT(t, openT(t, cfg))
			other := closeT(t, openT(t, config(t, dsn)))
			if err := other.Update(t.Context(), func(tx storage.Txn) error { return tx.Set([]byte("k"), []byte("0"), 0) }); err != nil {
				t.Fatal(err)
			}
			var runs atomic.Int64
			err := s.Update(t.Context(), func(tx storage.Txn) error {
				if _, err := tx.Get([]byte("k")); err != nil {
					return err
				}
				if runs.Add(1) == 1 { // another instance writes k after this read
					if err := other.Update(t.Context(), func(tx storage.Txn) error { return tx.Set([]byte("k"), []byte("other"), 0) }); err != nil {
						return err
					}
				}
				return tx.Set([]byte("k"), []byte("mine"), 0)
			})
			if err != nil {
				t.Fatal(err)
			}
			if runs.Load() != 2 {
				t.Fatalf("fn ran %d times, want 2", runs.Load())
			}
			if got := rec.Retries(); got != 1 {
				t.Errorf("%d conflict retries, want 1", got)
			}
		})
	}
}

// TestObserverGroups: a group's size, and why its members leave it: keys that meet
// another member's writes, an iteration, a group whose transaction fails.
func TestObserverGroups(t *testing.T) {
	t.Run("conflict and iterate", func(t *testing.T) {
		cfg, rec := observedConfig(t, pgtest.DSN(t))
		s := closeT(t, openT(t, cfg))
		errs, _ := inGroup(t, s,
			func(tx storage.Txn) error { return increment(tx, "hot") },
			func(tx storage.Txn) error { return increment(tx, "hot") }, // meets the first
			func(tx storage.Txn) error {
				return tx.IterateKeys([]byte("it/"), func([]byte) (bool, error) { return true, nil })
			},
			func(tx storage.Txn) error { return tx.Set([]byte("plain"), []byte("x"), 0) },
		)
		for i, err := range errs {
			if err != nil {
				t.Errorf("member %d: %v", i, err)
			}
		}
		// The Update holding the turn, a group of one; then the four queued;
		// then none (those that left run alone, outside groups).
		if got := rec.Groups(); !slices.Equal(got, []int{1, 4}) {
			t.Errorf("group sizes %v, want [1 4]", got)
		}
		want := map[storage.Fallback]int{storage.FallbackConflict: 1, storage.FallbackIterate: 1}
		if got := rec.Fallbacks(); !maps.Equal(got, want) {
			t.Errorf("fallbacks %v, want %v", got, want)
		}
	})
	t.Run("failed group", func(t *testing.T) {
		cfg, rec := observedConfig(t, pgtest.DSN(t))
		s := closeT(t, openT(t, cfg))
		long := make([]byte, 3000)
		rand.Read(long) // incompressible: too long for the primary key's index
		inGroup(t, s,
			func(tx storage.Txn) error { return tx.Set([]byte("ok/1"), []byte("1"), 0) },
			func(tx storage.Txn) error { return tx.Set(long, []byte("x"), 0) },
			func(tx storage.Txn) error { return tx.Set([]byte("ok/2"), []byte("2"), 0) },
		)
		if got := rec.Groups(); !slices.Equal(got, []int{1, 3}) {
			t.Errorf("group sizes %v, want [1 3]", got)
		}
		want := map[storage.Fallback]int{storage.FallbackFailedGroup: 3}
		if got := rec.Fallbacks(); !maps.Equal(got, want) {
			t.Errorf("fallbacks %v, want %v", got, want)
		}
	})
}
