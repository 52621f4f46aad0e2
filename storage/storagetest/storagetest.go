// Package storagetest is a conformance suite for storage.Store implementations. Every
// backend's tests call Run, and RunDurable (a backend kept in a directory) or RunReopen,
// so that all backends honour the same contract the domain packages rely on; a backend
// that several instances share also calls RunInstances. Each behaviour is a named
// subtest (records.go, iterate.go, transactions.go; dex's storage/conformance is the
// model), so a failing backend names what broke.
package storagetest

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/palmgate/palmgate/storage"
)

// errBoom is the error the suite returns from callbacks to check propagation.
var errBoom = errors.New("storagetest: boom")

// kv is one key/value pair seen by Iterate.
type kv struct{ k, v string }

// subTest is one behaviour of the suite, run on a fresh store.
type subTest struct {
	name string
	run  func(t *testing.T, s storage.Store)
}

// conformanceTests are the behaviours of one transaction at a time; see
// transactionTests for concurrent ones.
var conformanceTests = []subTest{
	{"GetMissing", testGetMissing},
	{"SetGet", testSetGet},
	{"Overwrite", testOverwrite},
	{"Delete", testDelete},
	{"ValuesOwnedByCaller", testValuesOwnedByCaller},
	{"IterateOrderAndPrefix", testIterateOrderAndPrefix},
	{"IterateEarlyStop", testIterateEarlyStop},
	{"IterateKeys", testIterateKeys},
	{"IterateError", testIterateError},
	{"ReadYourWrites", testReadYourWrites},
	{"TTL", testTTL},
	{"UpdateErrorCommitsNothing", testUpdateErrorCommitsNothing},
	{"ViewIsReadOnly", testViewIsReadOnly},
	{"Prefetch", testPrefetch},
	{"ReadKey", testReadKey},
	{"RepeatedWrites", testRepeatedWrites},
}

// Run runs the conformance suite, one named subtest per behaviour, each on a fresh
// store, then the transaction suite (concurrent Updates on one store). newStore must
// return a fresh, empty store each time it is called; the suite closes every store
// it opens.
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
	for _, tc := range conformanceTests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, open(t)) })
	}
	t.Run("Transactions", func(t *testing.T) {
		for _, tc := range transactionTests {
			t.Run(tc.name, func(t *testing.T) { tc.run(t, open(t)) })
		}
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
