package storagetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/palmgate/palmgate/storage"
)

// Iteration: prefix scans, their order and their early ends.

// testIterateOrderAndPrefix: Iterate sees exactly the keys under its prefix, in byte order.
func testIterateOrderAndPrefix(t *testing.T, s storage.Store) {
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
}

// testIterateEarlyStop: Iterate stops when its callback returns false.
func testIterateEarlyStop(t *testing.T, s storage.Store) {
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
}

// testIterateKeys: IterateKeys sees what Iterate sees, without the values.
func testIterateKeys(t *testing.T, s storage.Store) {
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
}

// testIterateError: an Iterate callback's error is returned as is.
func testIterateError(t *testing.T, s storage.Store) {
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
}
