package badgerstore

import (
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/storagetest"
)

// openObserved opens a store in a new directory that reports to a new Recorder.
func openObserved(t *testing.T) (*Store, *storagetest.Recorder) {
	t.Helper()
	rec := &storagetest.Recorder{}
	s, err := OpenWith(t.TempDir(), Options{Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), Observer: rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, rec
}

// TestObserverOperations: each Update and View is one duration of its op, and a
// lone Update is a group of one.
func TestObserverOperations(t *testing.T) {
	s, rec := openObserved(t)
	if err := s.Update(t.Context(), func(tx storage.Txn) error { return tx.Set([]byte("k"), []byte("v"), 0) }); err != nil {
		t.Fatal(err)
	}
	if _, err := storage.ReadKey(t.Context(), s, []byte("k")); err != nil {
		t.Fatal(err)
	}
	errBoom := errors.New("boom")
	if err := s.View(t.Context(), func(storage.Txn) error { return errBoom }); !errors.Is(err, errBoom) {
		t.Fatalf("View: %v", err)
	}
	if got := len(rec.Ops(storage.OpUpdate)); got != 1 {
		t.Errorf("%d update durations, want 1", got)
	}
	// ReadKey on Badger is a View; a failed View is measured too.
	if got := len(rec.Ops(storage.OpView)); got != 2 {
		t.Errorf("%d view durations, want 2", got)
	}
	for _, d := range append(rec.Ops(storage.OpUpdate), rec.Ops(storage.OpView)...) {
		if d <= 0 {
			t.Errorf("a duration of %v", d)
		}
	}
	if got := rec.Groups(); !slices.Equal(got, []int{1}) {
		t.Errorf("group sizes %v, want [1]", got)
	}
	if got := rec.Retries(); got != 0 {
		t.Errorf("%d conflict retries, want 0", got)
	}
}

// TestObserverConflictRetry: an Update whose commit conflicts, first as a group of
// one and then alone, counts one retry for each run after a conflict.
func TestObserverConflictRetry(t *testing.T) {
	s, rec := openObserved(t)
	var runs atomic.Int64
	err := s.Update(t.Context(), func(tx storage.Txn) error {
		if _, err := tx.Get([]byte("k")); err != nil && !errors.Is(err, storage.ErrNotFound) {
			return err
		}
		if runs.Add(1) <= 2 { // another writer commits k after this read, twice
			if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("k"), []byte("other")) }); err != nil {
				return err
			}
		}
		return tx.Set([]byte("k"), []byte("mine"), 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	if runs.Load() != 3 {
		t.Fatalf("fn ran %d times, want 3", runs.Load())
	}
	if got := rec.Retries(); got != 2 {
		t.Errorf("%d conflict retries, want 2 (after the grouped run and after the first run alone)", got)
	}
	if got := len(rec.Fallbacks()); got != 0 {
		t.Errorf("fallbacks %v, want none: a group of one conflicting is a retry", rec.Fallbacks())
	}
}

// TestObserverGroups: the sizes of group commits, and why members leave them: a
// fn that fails in the group, and a group whose commit conflicts.
func TestObserverGroups(t *testing.T) {
	for _, c := range []struct {
		name  string
		fail  bool // one member's fn fails
		other bool // another writer commits a key the group read
		want  map[storage.Fallback]int
	}{
		{"fn error", true, false, map[storage.Fallback]int{storage.FallbackError: 1}},
		{"failed group", false, true, map[storage.Fallback]int{storage.FallbackFailedGroup: 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, rec := openObserved(t)
			release, waitLeader := holdGroup(t, s)
			var interfered atomic.Bool
			var wg sync.WaitGroup
			for i, key := range []string{"a", "b", "c"} {
				wg.Go(func() {
					err := s.Update(t.Context(), func(tx storage.Txn) error {
						if _, err := tx.Get([]byte("k")); err != nil && !errors.Is(err, storage.ErrNotFound) {
							return err
						}
						if c.other && interfered.CompareAndSwap(false, true) {
							if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("k"), []byte("other")) }); err != nil {
								return err
							}
						}
						if c.fail && key == "b" {
							return errors.New("boom")
						}
						return tx.Set([]byte(key), []byte("v"), 0)
					})
					if (err != nil) != (c.fail && key == "b") {
						t.Errorf("Update %s: %v", key, err)
					}
				})
				waitQueued(t, s, i+1)
			}
			release()
			waitLeader()
			wg.Wait()
			groups := rec.Groups()
			if len(groups) < 2 || groups[0] != 1 || groups[1] != 3 {
				t.Errorf("group sizes %v, want [1 3 ...]: the leader alone, then the three queued", groups)
			}
			if got := rec.Fallbacks(); !maps.Equal(got, c.want) {
				t.Errorf("fallbacks %v, want %v", got, c.want)
			}
		})
	}
}
