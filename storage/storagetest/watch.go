package storagetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/palmgate/palmgate/storage"
)

// RunWatcher checks a store that is a storage.Watcher: which commits its counters
// count, and that a commit is counted only once reads begun later see it, which
// is what makes a cache of absent keys exact. newStore must return a fresh, empty
// store each time; the suite closes it.
func RunWatcher(t *testing.T, newStore func(t *testing.T) storage.Store) {
	open := func(t *testing.T) storage.Watcher {
		t.Helper()
		s := newStore(t)
		t.Cleanup(func() { _ = s.Close() })
		w, ok := s.(storage.Watcher)
		if !ok {
			t.Fatalf("%T is not a storage.Watcher", s)
		}
		return w
	}
	t.Run("WatchCounts", func(t *testing.T) { testWatchCounts(t, open(t)) })
	t.Run("WatchCountsOnlyVisibleCommits", func(t *testing.T) { testWatchVisible(t, open(t)) })
	t.Run("WatchCountsImports", func(t *testing.T) { testWatchImport(t, open(t), open(t)) })
}

func testWatchCounts(t *testing.T, w storage.Watcher) {
	s := w.(storage.Store)
	agents, other := w.Watch([]byte("a/")), w.Watch([]byte("b/"))
	if w.Watch([]byte("a/")) != agents {
		t.Fatal("Watch of the same prefix gave another counter")
	}
	count := func(what string, c *storage.Changes, want uint64) {
		t.Helper()
		if got := c.Count(); got != want {
			t.Errorf("after %s: Count = %d, want %d", what, got, want)
		}
	}
	set(t, s, "a/1", "x", 0)
	count("a Set under the prefix", agents, 1)
	count("a Set under another prefix", other, 0)
	set(t, s, "c/1", "x", 0)
	update(t, s, func(tx storage.Txn) error {
		_, err := tx.Get([]byte("a/1"))
		return err
	})
	view(t, s, func(tx storage.Txn) error {
		_, err := tx.Get([]byte("a/1"))
		return err
	})
	count("writes elsewhere, a read-only Update and a View", agents, 1)
	if err := s.Update(t.Context(), func(tx storage.Txn) error {
		if err := tx.Set([]byte("a/2"), []byte("x"), 0); err != nil {
			return err
		}
		return errBoom
	}); !errors.Is(err, errBoom) {
		t.Fatalf("failing Update = %v, want errBoom", err)
	}
	count("a failed Update that wrote under the prefix", agents, 1)
	update(t, s, func(tx storage.Txn) error { return tx.Delete([]byte("a/1")) })
	count("a Delete under the prefix", agents, 2)
	update(t, s, func(tx storage.Txn) error {
		if err := tx.Set([]byte("a/4"), []byte("x"), 0); err != nil {
			return err
		}
		return tx.Delete([]byte("a/4"))
	})
	count("one commit of two writes under the prefix", agents, 3)
	update(t, s, func(tx storage.Txn) error {
		if err := tx.Set([]byte("a/3"), []byte("x"), 0); err != nil {
			return err
		}
		return tx.Set([]byte("b/3"), []byte("x"), 0)
	})
	if agents.Count() <= 3 || other.Count() == 0 {
		t.Errorf("after one commit under both prefixes: Counts %d and %d, want both grown", agents.Count(), other.Count())
	}
}

// testWatchVisible reads a key while other goroutines write it, each read
// stamped with the Count before it began: once the write's Update has returned,
// every read that found the key absent must have a stamp below the Count. A
// store that counted a commit before it was visible would leave a read stamped
// with the new Count that still missed the write: a cache of absent keys would
// then keep a registered key absent for good.
func testWatchVisible(t *testing.T, w storage.Watcher) {
	s := w.(storage.Store)
	changes := w.Watch([]byte("v/"))
	const keys, readers = 50, 4
	for i := range keys {
		key := []byte(fmt.Sprintf("v/%03d", i))
		var absent sync.Map // stamps of reads that found key absent
		var stop atomic.Bool
		var wg sync.WaitGroup
		for range readers {
			wg.Go(func() {
				for !stop.Load() {
					stamp := changes.Count()
					_, err := storage.ReadKey(t.Context(), s, key)
					if errors.Is(err, storage.ErrNotFound) {
						absent.Store(stamp, true)
					} else if err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		// Concurrent Updates, so that a store that groups commits groups them.
		var writers sync.WaitGroup
		for j := range 3 {
			writers.Go(func() {
				k := key
				if j > 0 {
					k = []byte(fmt.Sprintf("v/%03d-%d", i, j))
				}
				if err := s.Update(t.Context(), func(tx storage.Txn) error { return tx.Set(k, []byte("x"), 0) }); err != nil {
					t.Error(err)
				}
			})
		}
		writers.Wait()
		after := changes.Count()
		stop.Store(true)
		wg.Wait()
		absent.Range(func(stamp, _ any) bool {
			if stamp.(uint64) >= after {
				t.Fatalf("key %s: a read stamped %d found it absent, but the Count after its write's Update returned is %d", key, stamp, after)
			}
			return true
		})
	}
}

func testWatchImport(t *testing.T, src, dst storage.Watcher) {
	im, ok := dst.(storage.Importer)
	ex, ok2 := src.(storage.Exporter)
	if !ok || !ok2 {
		t.Fatalf("%T and %T: want an Importer and an Exporter", dst, src)
	}
	set(t, src.(storage.Store), "a/1", "x", 0)
	changes := dst.Watch([]byte("a/"))
	if _, err := im.Import(t.Context(), ex); err != nil {
		t.Fatalf("Import: %v", err)
	}
	if changes.Count() == 0 {
		t.Error("Import wrote under a watched prefix and its Count did not grow")
	}
}
