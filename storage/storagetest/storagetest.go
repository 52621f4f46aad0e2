// Package storagetest is a conformance suite for storage.Store implementations. Every
// backend's tests call Run, and RunDurable (a backend kept in a directory) or RunReopen,
// so that all backends honour the same contract the domain packages rely on.
package storagetest

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/palmgate/palmgate/storage"
)

// errBoom is the error the suite returns from callbacks to check propagation.
var errBoom = errors.New("storagetest: boom")

// kv is one key/value pair seen by Iterate.
type kv struct{ k, v string }

// Run runs the conformance suite. newStore must return a fresh, empty store each time
// it is called; the suite closes every store it opens.
func Run(t *testing.T, newStore func(t *testing.T) storage.Store) {
	open := func(t *testing.T) storage.Store {
		t.Helper()
		s := newStore(t)
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return s
	}

	t.Run("GetMissing", func(t *testing.T) {
		s := open(t)
		if v, err := get(t, s, "missing"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("Get(missing) = %q, %v; want storage.ErrNotFound", v, err)
		}
	})

	t.Run("SetGet", func(t *testing.T) {
		s := open(t)
		set(t, s, "k", "v1", 0)
		set(t, s, "empty", "", 0)
		wantValue(t, s, "k", "v1")
		wantValue(t, s, "empty", "")
	})

	t.Run("Overwrite", func(t *testing.T) {
		s := open(t)
		set(t, s, "k", "v1", 0)
		set(t, s, "k", "second", 0)
		wantValue(t, s, "k", "second")
	})

	t.Run("Delete", func(t *testing.T) {
		s := open(t)
		set(t, s, "k", "v", 0)
		set(t, s, "other", "o", 0)
		update(t, s, func(tx storage.Txn) error { return tx.Delete([]byte("k")) })
		wantMissing(t, s, "k")
		wantValue(t, s, "other", "o")
		update(t, s, func(tx storage.Txn) error { return tx.Delete([]byte("never-set")) })
		wantMissing(t, s, "never-set")
	})

	t.Run("ValuesOwnedByCaller", func(t *testing.T) {
		s := open(t)
		set(t, s, "p/a", "alpha", 0)
		set(t, s, "p/b", "bravo", 0)
		var got []byte
		var seen [][]byte
		view(t, s, func(tx storage.Txn) error {
			var err error
			if got, err = tx.Get([]byte("p/a")); err != nil {
				return err
			}
			return tx.Iterate([]byte("p/"), func(k, v []byte) (bool, error) {
				seen = append(seen, k, v)
				return true, nil
			})
		})
		// Churn the store so that any buffer the backend lent out would be reused.
		for i := range 50 {
			set(t, s, fmt.Sprintf("q/%02d", i), "zzzzzzzzzzzzzzzz", 0)
		}
		want := []string{"p/a", "alpha", "p/b", "bravo"}
		if string(got) != "alpha" {
			t.Errorf("value from Get changed after the transaction: %q, want %q", got, "alpha")
		}
		if len(seen) != len(want) {
			t.Fatalf("Iterate yielded %d keys and values, want %d", len(seen), len(want))
		}
		for i := range want {
			if string(seen[i]) != want[i] {
				t.Errorf("Iterate slice %d changed after the transaction: %q, want %q", i, seen[i], want[i])
			}
		}
		// Mutating returned slices must not reach the store.
		got[0], seen[2][0], seen[3][0] = 'X', 'X', 'X'
		wantValue(t, s, "p/a", "alpha")
		wantKVs(t, "Iterate after mutating returned slices", collect(t, s, "p/"),
			[]kv{{"p/a", "alpha"}, {"p/b", "bravo"}})
	})

	t.Run("IterateOrderAndPrefix", func(t *testing.T) {
		s := open(t)
		for _, k := range []string{"p/b", "q/a", "p/\xff", "p", "p/ab", "o/z", "p/\x00", "p/a"} {
			set(t, s, k, "v"+k, 0)
		}
		got := collect(t, s, "p/")
		want := []kv{{"p/\x00", "vp/\x00"}, {"p/a", "vp/a"}, {"p/ab", "vp/ab"}, {"p/b", "vp/b"}, {"p/\xff", "vp/\xff"}}
		wantKVs(t, "Iterate(p/)", got, want)
		all := collect(t, s, "")
		wantAll := []kv{{"o/z", "vo/z"}, {"p", "vp"}}
		wantAll = append(wantAll, want...)
		wantAll = append(wantAll, kv{"q/a", "vq/a"})
		wantKVs(t, "Iterate(empty prefix)", all, wantAll)
		wantKVs(t, "Iterate(none/)", collect(t, s, "none/"), nil)
	})

	t.Run("IterateEarlyStop", func(t *testing.T) {
		s := open(t)
		for _, k := range []string{"p/1", "p/2", "p/3", "p/4"} {
			set(t, s, k, "v", 0)
		}
		var keys []string
		view(t, s, func(tx storage.Txn) error {
			return tx.Iterate([]byte("p/"), func(k, _ []byte) (bool, error) {
				keys = append(keys, string(k))
				return len(keys) < 2, nil
			})
		})
		if fmt.Sprint(keys) != fmt.Sprint([]string{"p/1", "p/2"}) {
			t.Errorf("Iterate visited %q after fn returned false at the 2nd key, want [p/1 p/2]", keys)
		}
	})

	t.Run("IterateKeys", func(t *testing.T) {
		s := open(t)
		for _, k := range []string{"p/b", "q/a", "p/a", "p", "p/c"} {
			set(t, s, k, "v"+k, 0)
		}
		keysOf := func(tx storage.Txn, prefix string, stopAfter int) ([]string, error) {
			var keys []string
			err := tx.IterateKeys([]byte(prefix), func(k []byte) (bool, error) {
				keys = append(keys, string(k))
				return stopAfter == 0 || len(keys) < stopAfter, nil
			})
			return keys, err
		}
		view(t, s, func(tx storage.Txn) error {
			for _, c := range []struct {
				prefix string
				stop   int
				want   []string
			}{
				{"p/", 0, []string{"p/a", "p/b", "p/c"}},
				{"", 0, []string{"p", "p/a", "p/b", "p/c", "q/a"}},
				{"p/", 2, []string{"p/a", "p/b"}},
				{"none/", 0, nil},
			} {
				got, err := keysOf(tx, c.prefix, c.stop)
				if err != nil {
					return err
				}
				if fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Errorf("IterateKeys(%q) stopping after %d = %q, want %q", c.prefix, c.stop, got, c.want)
				}
			}
			return nil
		})
		var inside []string
		update(t, s, func(tx storage.Txn) error {
			if err := tx.Set([]byte("p/d"), []byte("new"), 0); err != nil {
				return err
			}
			if err := tx.Delete([]byte("p/a")); err != nil {
				return err
			}
			var err error
			inside, err = keysOf(tx, "p/", 0)
			return err
		})
		if want := []string{"p/b", "p/c", "p/d"}; fmt.Sprint(inside) != fmt.Sprint(want) {
			t.Errorf("IterateKeys inside Update = %q, want its own writes: %q", inside, want)
		}
		err := s.View(t.Context(), func(tx storage.Txn) error {
			return tx.IterateKeys([]byte("p/"), func([]byte) (bool, error) { return true, errBoom })
		})
		if !errors.Is(err, errBoom) {
			t.Errorf("View returned %v, want the error returned by the IterateKeys callback", err)
		}
	})

	t.Run("IterateError", func(t *testing.T) {
		s := open(t)
		set(t, s, "p/1", "v", 0)
		set(t, s, "p/2", "v", 0)
		calls := 0
		err := s.View(t.Context(), func(tx storage.Txn) error {
			return tx.Iterate([]byte("p/"), func(_, _ []byte) (bool, error) {
				calls++
				return true, errBoom
			})
		})
		if !errors.Is(err, errBoom) {
			t.Errorf("View returned %v, want the error returned by the Iterate callback", err)
		}
		if calls != 1 {
			t.Errorf("Iterate called fn %d times after it returned an error, want 1", calls)
		}
	})

	t.Run("ReadYourWrites", func(t *testing.T) {
		s := open(t)
		set(t, s, "p/a", "old-a", 0)
		set(t, s, "p/b", "old-b", 0)
		var got []kv
		update(t, s, func(tx storage.Txn) error {
			got = nil // fn may run more than once
			if err := tx.Set([]byte("p/c"), []byte("new-c"), 0); err != nil {
				return err
			}
			if err := tx.Set([]byte("p/b"), []byte("new-b"), 0); err != nil {
				return err
			}
			if err := tx.Delete([]byte("p/a")); err != nil {
				return err
			}
			if v, err := tx.Get([]byte("p/c")); err != nil || string(v) != "new-c" {
				return fmt.Errorf("Get of own write = %q, %v; want new-c", v, err)
			}
			if _, err := tx.Get([]byte("p/a")); !errors.Is(err, storage.ErrNotFound) {
				return fmt.Errorf("Get of own delete = %v; want ErrNotFound", err)
			}
			return tx.Iterate([]byte("p/"), func(k, v []byte) (bool, error) {
				got = append(got, kv{string(k), string(v)})
				return true, nil
			})
		})
		wantKVs(t, "Iterate inside Update", got, []kv{{"p/b", "new-b"}, {"p/c", "new-c"}})
		wantKVs(t, "Iterate after commit", collect(t, s, "p/"), []kv{{"p/b", "new-b"}, {"p/c", "new-c"}})
	})

	t.Run("TTL", func(t *testing.T) {
		s := open(t)
		set(t, s, "p/short", "gone soon", time.Second)
		set(t, s, "p/forever", "stays", 0)
		wantValue(t, s, "p/short", "gone soon")
		deadline := time.Now().Add(3 * time.Second)
		for {
			_, err := get(t, s, "p/short")
			if errors.Is(err, storage.ErrNotFound) {
				break
			}
			if err != nil {
				t.Fatalf("Get(p/short): %v", err)
			}
			if time.Now().After(deadline) {
				t.Fatal("record with a 1s ttl still readable after 3s")
			}
			time.Sleep(50 * time.Millisecond)
		}
		wantKVs(t, "Iterate after expiry", collect(t, s, "p/"), []kv{{"p/forever", "stays"}})
		wantValue(t, s, "p/forever", "stays")
	})

	t.Run("UpdateErrorCommitsNothing", func(t *testing.T) {
		s := open(t)
		set(t, s, "kept", "orig", 0)
		err := s.Update(t.Context(), func(tx storage.Txn) error {
			if err := tx.Set([]byte("new"), []byte("v"), 0); err != nil {
				return err
			}
			if err := tx.Set([]byte("kept"), []byte("changed"), 0); err != nil {
				return err
			}
			return errBoom
		})
		if !errors.Is(err, errBoom) {
			t.Errorf("Update returned %v, want fn's error", err)
		}
		wantMissing(t, s, "new")
		wantValue(t, s, "kept", "orig")
	})

	t.Run("ViewIsReadOnly", func(t *testing.T) {
		s := open(t)
		set(t, s, "k", "v", 0)
		var setErr, delErr error
		if err := s.View(t.Context(), func(tx storage.Txn) error {
			setErr = tx.Set([]byte("new"), []byte("v"), 0)
			delErr = tx.Delete([]byte("k"))
			return nil
		}); err != nil {
			t.Errorf("View whose fn returned nil: %v", err)
		}
		if setErr == nil {
			t.Error("Set inside View returned nil, want an error")
		}
		if delErr == nil {
			t.Error("Delete inside View returned nil, want an error")
		}
		wantMissing(t, s, "new")
		wantValue(t, s, "k", "v")
	})

	t.Run("Prefetch", func(t *testing.T) {
		s := open(t)
		set(t, s, "f/a", "a", 0)
		set(t, s, "f/b", "b", 0)
		update(t, s, func(tx storage.Txn) error {
			if err := tx.Set([]byte("f/c"), []byte("c"), 0); err != nil {
				return err
			}
			if err := storage.Prefetch(tx, []byte("f/a"), []byte("f/b"), []byte("f/c"), []byte("f/new"), []byte("f/a")); err != nil {
				return err
			}
			if err := tx.Delete([]byte("f/b")); err != nil {
				return err
			}
			if err := tx.Set([]byte("f/new"), []byte("new"), 0); err != nil {
				return err
			}
			for key, want := range map[string]string{"f/a": "a", "f/c": "c", "f/new": "new", "f/b": ""} {
				v, err := tx.Get([]byte(key))
				switch {
				case want == "" && !errors.Is(err, storage.ErrNotFound):
					t.Errorf("Get(%s) after Prefetch and Delete = %q, %v; want storage.ErrNotFound", key, v, err)
				case want != "" && (err != nil || string(v) != want):
					t.Errorf("Get(%s) after Prefetch = %q, %v; want %q", key, v, err, want)
				}
			}
			v, err := tx.Get([]byte("f/a"))
			if err != nil {
				return err
			}
			v[0] = 'X' // the caller's to change
			if v, err := tx.Get([]byte("f/a")); err != nil || string(v) != "a" {
				t.Errorf("Get(f/a) after changing a returned value = %q, %v; want %q", v, err, "a")
			}
			return nil
		})
		wantKVs(t, "Iterate after the Update", collect(t, s, "f/"), []kv{{"f/a", "a"}, {"f/c", "c"}, {"f/new", "new"}})
		view(t, s, func(tx storage.Txn) error {
			if err := storage.Prefetch(tx, []byte("f/a"), []byte("f/b")); err != nil {
				return err
			}
			if v, err := tx.Get([]byte("f/a")); err != nil || string(v) != "a" {
				t.Errorf("Get(f/a) after Prefetch in View = %q, %v; want %q", v, err, "a")
			}
			if _, err := tx.Get([]byte("f/b")); !errors.Is(err, storage.ErrNotFound) {
				t.Errorf("Get(f/b) after Prefetch in View = %v; want storage.ErrNotFound", err)
			}
			return nil
		})
	})

	t.Run("ReadKey", func(t *testing.T) {
		s := open(t)
		set(t, s, "rk/a", "a", 0)
		set(t, s, "rk/empty", "", 0)
		set(t, s, "rk/short", "gone soon", time.Millisecond)
		for key, want := range map[string]string{"rk/a": "a", "rk/empty": ""} {
			if v, err := storage.ReadKey(t.Context(), s, []byte(key)); err != nil || string(v) != want || v == nil {
				t.Errorf("ReadKey(%s) = %q (nil: %v), %v; want %q", key, v, v == nil, err, want)
			}
		}
		if v, err := storage.ReadKey(t.Context(), s, []byte("rk/missing")); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("ReadKey(rk/missing) = %q, %v; want storage.ErrNotFound", v, err)
		}
		deadline := time.Now().Add(3 * time.Second)
		for {
			_, err := storage.ReadKey(t.Context(), s, []byte("rk/short"))
			if errors.Is(err, storage.ErrNotFound) {
				break
			}
			if err != nil || time.Now().After(deadline) {
				t.Fatalf("ReadKey of a record with a 1ms ttl after %v: %v", 3*time.Second, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})

	t.Run("RepeatedWrites", func(t *testing.T) {
		s := open(t)
		set(t, s, "w/deleted", "old", 0)
		set(t, s, "w/recreated", "old", 0)
		update(t, s, func(tx storage.Txn) error {
			for _, w := range []struct {
				key, value string
				ttl        time.Duration
				del        bool
			}{
				{key: "w/k", value: "1"},
				{key: "w/k", value: "2", ttl: time.Millisecond},
				{key: "w/k", value: "3"}, // the last ttl counts: none
				{key: "w/deleted", value: "new"},
				{key: "w/deleted", del: true},
				{key: "w/recreated", del: true},
				{key: "w/recreated", value: "again"},
			} {
				var err error
				if w.del {
					err = tx.Delete([]byte(w.key))
				} else {
					err = tx.Set([]byte(w.key), []byte(w.value), w.ttl)
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
		time.Sleep(20 * time.Millisecond) // past the ttl the last Set replaced
		wantKVs(t, "Iterate after repeated writes", collect(t, s, "w/"), []kv{{"w/k", "3"}, {"w/recreated", "again"}})
	})

	t.Run("AtomicIncrement", func(t *testing.T) {
		s := open(t)
		const workers, perWorker = 32, 20
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for range workers {
			wg.Go(func() {
				for range perWorker {
					if err := s.Update(t.Context(), increment); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("Update(increment): %v", err)
		}
		wantValue(t, s, "counter", strconv.Itoa(workers*perWorker))
	})
}

// RunDurable checks that committed writes survive Close and reopening the same
// directory. open must open (creating if needed) the store kept in dir.
func RunDurable(t *testing.T, open func(t *testing.T, dir string) storage.Store) {
	t.Run("Durable", func(t *testing.T) {
		dir := t.TempDir()
		durable(t, func(t *testing.T) storage.Store { return open(t, dir) })
	})
}

// RunReopen is RunDurable for backends kept somewhere other than a directory (a
// database server, say): it checks that committed writes survive Close and opening
// the store again. Every call of open must open the same backing storage, empty
// before the first call.
func RunReopen(t *testing.T, open func(t *testing.T) storage.Store) {
	t.Run("Durable", func(t *testing.T) { durable(t, open) })
}

// RunClosed checks Close: a second Close returns nil, and Update, View and
// storage.ReadKey on a closed store return errors wrapping closed.
func RunClosed(t *testing.T, open func(t *testing.T) storage.Store, closed error) {
	s := open(t)
	if err := s.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	noop := func(storage.Txn) error { return nil }
	if err := s.Update(t.Context(), noop); !errors.Is(err, closed) {
		t.Errorf("Update after Close = %v, want %v", err, closed)
	}
	if err := s.View(t.Context(), noop); !errors.Is(err, closed) {
		t.Errorf("View after Close = %v, want %v", err, closed)
	}
	if _, err := storage.ReadKey(t.Context(), s, []byte("k")); !errors.Is(err, closed) {
		t.Errorf("ReadKey after Close = %v, want %v", err, closed)
	}
}

// durable writes through one store, closes it and checks the writes through a
// second one returned by open.
func durable(t *testing.T, open func(t *testing.T) storage.Store) {
	s := open(t)
	set(t, s, "p/a", "alpha", 0)
	set(t, s, "p/b", "bravo", 0)
	set(t, s, "p/c", "charlie", time.Hour)
	set(t, s, "p/b", "bravo-2", 0)
	set(t, s, "p/gone", "x", 0)
	update(t, s, func(tx storage.Txn) error { return tx.Delete([]byte("p/gone")) })
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s = open(t)
	defer func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close after reopen: %v", err)
		}
	}()
	wantKVs(t, "Iterate after reopen", collect(t, s, "p/"),
		[]kv{{"p/a", "alpha"}, {"p/b", "bravo-2"}, {"p/c", "charlie"}})
	wantMissing(t, s, "p/gone")
	set(t, s, "p/d", "delta", 0) // still writable after reopen
	wantValue(t, s, "p/d", "delta")
}

// increment adds one to the decimal counter under "counter".
func increment(tx storage.Txn) error {
	n := 0
	v, err := tx.Get([]byte("counter"))
	switch {
	case errors.Is(err, storage.ErrNotFound):
	case err != nil:
		return err
	default:
		if n, err = strconv.Atoi(string(v)); err != nil {
			return fmt.Errorf("counter %q: %w", v, err)
		}
	}
	return tx.Set([]byte("counter"), []byte(strconv.Itoa(n+1)), 0)
}

func update(t *testing.T, s storage.Store, fn func(storage.Txn) error) {
	t.Helper()
	if err := s.Update(t.Context(), fn); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

func view(t *testing.T, s storage.Store, fn func(storage.Txn) error) {
	t.Helper()
	if err := s.View(t.Context(), fn); err != nil {
		t.Fatalf("View: %v", err)
	}
}

func set(t *testing.T, s storage.Store, key, value string, ttl time.Duration) {
	t.Helper()
	update(t, s, func(tx storage.Txn) error { return tx.Set([]byte(key), []byte(value), ttl) })
}

// get reads key in its own View; View errors other than the Get's are fatal.
func get(t *testing.T, s storage.Store, key string) ([]byte, error) {
	t.Helper()
	var v []byte
	var getErr error
	view(t, s, func(tx storage.Txn) error {
		v, getErr = tx.Get([]byte(key))
		return nil
	})
	return v, getErr
}

func wantValue(t *testing.T, s storage.Store, key, want string) {
	t.Helper()
	v, err := get(t, s, key)
	if err != nil {
		t.Fatalf("Get(%q): %v; want %q", key, err, want)
	}
	if !bytes.Equal(v, []byte(want)) {
		t.Errorf("Get(%q) = %q, want %q", key, v, want)
	}
}

func wantMissing(t *testing.T, s storage.Store, key string) {
	t.Helper()
	if v, err := get(t, s, key); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Get(%q) = %q, %v; want storage.ErrNotFound", key, v, err)
	}
}

func collect(t *testing.T, s storage.Store, prefix string) []kv {
	t.Helper()
	var out []kv
	view(t, s, func(tx storage.Txn) error {
		return tx.Iterate([]byte(prefix), func(k, v []byte) (bool, error) {
			out = append(out, kv{string(k), string(v)})
			return true, nil
		})
	})
	return out
}

func wantKVs(t *testing.T, what string, got, want []kv) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s = %q, want %q", what, got, want)
		return
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s = %q, want %q", what, got, want)
			return
		}
	}
}
