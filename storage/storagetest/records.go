package storagetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/palmgate/palmgate/storage"
)

// Records: reads, writes, deletes and expiry in one transaction at a time.

// testGetMissing: a missing key is storage.ErrNotFound.
func testGetMissing(t *testing.T, s storage.Store) {
	if v, err := get(t, s, "missing"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get(missing) = %q, %v; want storage.ErrNotFound", v, err)
	}
}

// testSetGet: a value written is read back, the empty value included.
func testSetGet(t *testing.T, s storage.Store) {
	set(t, s, "k", "v1", 0)
	set(t, s, "empty", "", 0)
	wantValue(t, s, "k", "v1")
	wantValue(t, s, "empty", "")
}

// testOverwrite: a second Set replaces the value.
func testOverwrite(t *testing.T, s storage.Store) {
	set(t, s, "k", "v1", 0)
	set(t, s, "k", "second", 0)
	wantValue(t, s, "k", "second")
}

// testDelete: Delete removes one key, and deleting a missing key is no error.
func testDelete(t *testing.T, s storage.Store) {
	set(t, s, "k", "v", 0)
	set(t, s, "other", "o", 0)
	update(t, s, func(tx storage.Txn) error { return tx.Delete([]byte("k")) })
	wantMissing(t, s, "k")
	wantValue(t, s, "other", "o")
	update(t, s, func(tx storage.Txn) error { return tx.Delete([]byte("never-set")) })
	wantMissing(t, s, "never-set")
}

// testValuesOwnedByCaller: values returned by Get and Iterate stay valid and unchanged after the transaction.
func testValuesOwnedByCaller(t *testing.T, s storage.Store) {
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
}

// testReadYourWrites: a transaction reads its own uncommitted writes and deletes.
func testReadYourWrites(t *testing.T, s storage.Store) {
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
}

// testRepeatedWrites: the last of several writes to one key in a transaction wins, its TTL included.
func testRepeatedWrites(t *testing.T, s storage.Store) {
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
}

// testTTL: a record written with a TTL disappears from every read once it expires.
func testTTL(t *testing.T, s storage.Store) {
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
}

// testUpdateErrorCommitsNothing: an Update whose fn fails commits none of its writes.
func testUpdateErrorCommitsNothing(t *testing.T, s storage.Store) {
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
}

// testViewIsReadOnly: Set and Delete fail in a View.
func testViewIsReadOnly(t *testing.T, s storage.Store) {
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
}

// testPrefetch: a Prefetcher's Prefetch changes no answer.
func testPrefetch(t *testing.T, s storage.Store) {
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
}

// testReadKey: storage.ReadKey reads one key, through the KeyReader when the store has one.
func testReadKey(t *testing.T, s storage.Store) {
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
}
