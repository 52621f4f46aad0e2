package agent

import (
	"context"
	"testing"

	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/memstore"
)

// checkSignature verifies a signature of a through h and checks its answer.
func checkSignature(t *testing.T, h *harness, a *testAgent, wantRegistered bool) {
	t.Helper()
	got, err := h.reg.VerifySignatureRequest(context.Background(), mustJSON(t, a.fields("hello", 1)))
	if err != nil || !got.Verified || got.Registered != wantRegistered {
		t.Fatalf("VerifySignatureRequest(%s): %+v, %v; want verified, registered %v", a.deviceID, got, err, wantRegistered)
	}
}

// lookupKey looks a's key up through h and checks whether it is registered.
func lookupKey(t *testing.T, h *harness, a *testAgent, wantRegistered bool) {
	t.Helper()
	l, err := h.reg.LookupPublicKey(context.Background(), a.pub)
	if err != nil || l.Registered != wantRegistered {
		t.Fatalf("LookupPublicKey(%s): %+v, %v; want registered %v", a.deviceID, l, err, wantRegistered)
	}
}

// TestAbsentKeysForgottenAtRegistration: a key found unregistered is answered
// from memory next time, and registered the moment its registration commits,
// whichever Service of the store (a config generation) registered it.
func TestAbsentKeysForgottenAtRegistration(t *testing.T) {
	store := memstore.New()
	h, other := newHarnessOn(t, store), newHarnessOn(t, store)
	a := newTestAgent(t, "absent", "absent-key")

	checkSignature(t, h, a, false)
	lookupKey(t, h, a, false)
	before := cacheStats(h)
	checkSignature(t, h, a, false)
	lookupKey(t, h, a, false)
	expectCacheDelta(t, "a signature check and a lookup of a key found unregistered", before, cacheStats(h), map[string][2]uint64{
		CacheRegisteredKeys: {0, 2}, CacheValidKeys: {1, 0}, CacheAbsentKeys: {2, 0},
	})

	other.register(t, a, "alice")
	checkSignature(t, h, a, true)

	b := newTestAgent(t, "absent-2", "absent-key-2")
	lookupKey(t, h, b, false)
	other.register(t, b, "alice")
	lookupKey(t, h, b, true)
}

// unwatchedStore hides its store's Watch: a store other processes write too.
type unwatchedStore struct{ storage.Store }

// TestAbsentKeysNotKeptOnSharedStore: on a store that is not a storage.Watcher
// (PostgreSQL, which other instances write), an absence is never remembered, so
// a registration another process commits shows on the next check.
func TestAbsentKeysNotKeptOnSharedStore(t *testing.T) {
	shared := memstore.New()
	h := newHarnessOn(t, unwatchedStore{shared})
	elsewhere := newHarnessOn(t, shared) // another instance: its writes pass h by
	a := newTestAgent(t, "elsewhere", "elsewhere-key")

	checkSignature(t, h, a, false)
	lookupKey(t, h, a, false)
	elsewhere.register(t, a, "alice")
	checkSignature(t, h, a, true)
	if s := cacheStats(h)[CacheAbsentKeys]; s.Hits+s.Misses != 0 {
		t.Errorf("the absent-key cache counted %d hits and %d misses on a store it cannot watch", s.Hits, s.Misses)
	}
}

// TestAbsentKeysStampedBeforeAWrite: an absence read before a write of the key
// index is not remembered, and one remembered is forgotten at the next write.
func TestAbsentKeysStampedBeforeAWrite(t *testing.T) {
	store := memstore.New()
	var a absentKeys
	a.watchKeyIndex(store)
	key := newTestAgent(t, "k", "k-key").pub
	writeIndex := func() {
		t.Helper()
		if err := store.Update(context.Background(), func(tx storage.Txn) error {
			return tx.Set(publicKeyKey([]byte("another key")), []byte("d"), 0)
		}); err != nil {
			t.Fatal(err)
		}
	}

	stamp := a.stamp()
	writeIndex() // commits between the read and put
	a.put(key, stamp)
	if a.has(key) {
		t.Error("an absence read before a key index write was remembered")
	}
	a.put(key, a.stamp())
	if !a.has(key) {
		t.Fatal("an absence read with no write since was not remembered")
	}
	if err := store.Update(context.Background(), func(tx storage.Txn) error {
		return tx.Set([]byte("agent/d/unrelated"), []byte("x"), 0)
	}); err != nil {
		t.Fatal(err)
	}
	if !a.has(key) {
		t.Error("a write outside the key index made the absence forgotten")
	}
	writeIndex()
	if a.has(key) {
		t.Error("an absence was still remembered after a key index write")
	}
}
