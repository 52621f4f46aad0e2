package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/memstore"
)

// coldReads wraps a Store: its Updates count the Gets that neither a Prefetch nor a
// write of the same transaction covered, and the Prefetches that asked for a key
// not known yet. On a database server each of those is a round trip of its own.
type coldReads struct {
	storage.Store
	n          atomic.Int64
	prefetches atomic.Int64
}

func (c *coldReads) Update(ctx context.Context, fn func(storage.Txn) error) error {
	return c.Store.Update(ctx, func(txn storage.Txn) error {
		return fn(&coldTxn{Txn: txn, c: c, known: map[string]bool{}})
	})
}

type coldTxn struct {
	storage.Txn
	c     *coldReads
	known map[string]bool
}

func (t *coldTxn) Prefetch(keys ...[]byte) error {
	asks := false
	for _, k := range keys {
		asks = asks || !t.known[string(k)]
		t.known[string(k)] = true
	}
	if asks {
		t.c.prefetches.Add(1)
	}
	return storage.Prefetch(t.Txn, keys...)
}

func (t *coldTxn) Get(key []byte) ([]byte, error) {
	if !t.known[string(key)] {
		t.c.n.Add(1)
	}
	return t.Txn.Get(key)
}

func (t *coldTxn) Set(key, value []byte, ttl time.Duration) error {
	t.known[string(key)] = true
	return t.Txn.Set(key, value, ttl)
}

func (t *coldTxn) Delete(key []byte) error {
	t.known[string(key)] = true
	return t.Txn.Delete(key)
}

// TestRegistrationReadsPrefetched: the transactions of a registration, Init and
// the palm scan that completes it, read nothing they did not prefetch, and
// prefetch as few times as their reads depend on each other: Init once, the
// completion twice (the challenge, then what it names), so that on PostgreSQL
// each costs its few round trips (docs/PERFORMANCE.md).
func TestRegistrationReadsPrefetched(t *testing.T) {
	store := &coldReads{Store: memstore.New()}
	h := newHarnessOn(t, store)
	for _, address := range []string{"", "192.0.2.7"} { // with and without an address count
		a := newTestAgent(t, "prefetched-"+address, "prefetched-"+address)
		s, err := h.reg.Init(context.Background(), a.registration(t, h.clock.Now()), address)
		if err != nil {
			t.Fatal(err)
		}
		if n := store.n.Swap(0); n != 0 {
			t.Errorf("Init (address %q): %d Gets not prefetched", address, n)
		}
		if n := store.prefetches.Swap(0); n != 1 {
			t.Errorf("Init (address %q): %d prefetches, want 1", address, n)
		}
		h.scan(t, s, "owner-"+address)
		if n := store.n.Swap(0); n != 0 {
			t.Errorf("completion (address %q): %d Gets not prefetched", address, n)
		}
		if n := store.prefetches.Swap(0); n != 2 {
			t.Errorf("completion (address %q): %d prefetches, want 2", address, n)
		}
		if got := h.session(t, s.ID); got.Status != SessionCompleted {
			t.Fatalf("session %s, want completed", got.Status)
		}
	}
}

// TestRegistrationWithoutReadHints: a challenge stored before challenges named
// their outcome's reads still completes its registration; its completion reads
// the session's other keys in one more round.
func TestRegistrationWithoutReadHints(t *testing.T) {
	store := &coldReads{Store: memstore.New()}
	h := newHarnessOn(t, store)
	a := newTestAgent(t, "unhinted", "unhinted")
	s, err := h.reg.Init(context.Background(), a.registration(t, h.clock.Now()), "192.0.2.8")
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("palm/c/" + s.ChallengeID)
	err = store.Update(context.Background(), func(txn storage.Txn) error {
		b, err := txn.Get(key)
		if err != nil {
			return err
		}
		var r map[string]any
		if err := json.Unmarshal(b, &r); err != nil {
			return err
		}
		if _, ok := r["reads"]; !ok {
			return fmt.Errorf("the challenge record has no reads: %s", b)
		}
		delete(r, "reads")
		if b, err = json.Marshal(r); err != nil {
			return err
		}
		return txn.Set(key, b, time.Hour)
	})
	if err != nil {
		t.Fatal(err)
	}
	store.n.Store(0)
	store.prefetches.Store(0)
	h.scan(t, s, "owner-unhinted")
	if n := store.n.Load(); n != 0 {
		t.Errorf("completion: %d Gets not prefetched", n)
	}
	if n := store.prefetches.Load(); n != 3 {
		t.Errorf("completion: %d prefetches, want 3", n)
	}
	if got := h.session(t, s.ID); got.Status != SessionCompleted {
		t.Fatalf("session %s, want completed", got.Status)
	}
}

// keyReads wraps a Store as a storage.KeyReader, counting its ReadKeys and Views
// (its reads of one key and its read transactions):
// on a database server a ReadKey is one round trip and a View two.
type keyReads struct {
	storage.Store
	reads, views atomic.Int64
}

func (k *keyReads) ReadKey(ctx context.Context, key []byte) ([]byte, error) {
	k.reads.Add(1)
	return storage.ReadKey(ctx, k.Store, key)
}

func (k *keyReads) View(ctx context.Context, fn func(storage.Txn) error) error {
	k.views.Add(1)
	return k.Store.View(ctx, fn)
}

// TestLookupsReadOneKey: a lookup or signature check that palmgate does not
// answer from memory reads one key with storage.ReadKey, not a View, found or not.
func TestLookupsReadOneKey(t *testing.T) {
	store := &keyReads{Store: memstore.New()}
	a := newTestAgent(t, "one-key", "one-key")
	newHarnessOn(t, store).register(t, a, "owner")
	unknown := newTestAgent(t, "unknown", "unknown")
	for _, c := range []struct {
		name string
		read func(h *harness) error
	}{
		{"device, registered", func(h *harness) error { _, err := h.reg.LookupDevice(t.Context(), a.deviceID); return err }},
		{"device, unknown", func(h *harness) error { _, err := h.reg.LookupDevice(t.Context(), unknown.deviceID); return err }},
		{"key, registered", func(h *harness) error { _, err := h.reg.LookupPublicKey(t.Context(), a.pub); return err }},
		{"key, unknown", func(h *harness) error { _, err := h.reg.LookupPublicKey(t.Context(), unknown.pub); return err }},
		{"signature, registered", func(h *harness) error { return verifyOnce(t, h, a) }},
		{"signature, unknown", func(h *harness) error { return verifyOnce(t, h, unknown) }},
	} {
		h := newHarnessOn(t, store) // nothing remembered yet
		primeFreshness(t, h)
		store.reads.Store(0)
		store.views.Store(0)
		if err := c.read(h); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if r, v := store.reads.Load(), store.views.Load(); r != 1 || v != 0 {
			t.Errorf("%s: %d ReadKeys and %d Views, want 1 and 0", c.name, r, v)
		}
	}
}

// primeFreshness reads the removal generation as an instance's first lookup does
// (once in its life), so that the reads counted next are those of every lookup.
func primeFreshness(t *testing.T, h *harness) {
	t.Helper()
	if err := h.reg.fresh.usable(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func verifyOnce(t *testing.T, h *harness, a *testAgent) error {
	c, err := ParseChallenge(mustJSON(t, a.fields("hello", 1)))
	if err != nil {
		return err
	}
	_, err = h.reg.VerifySignature(t.Context(), c)
	return err
}

// TestLookupOldKeyIndex: a key index written before it held a copy of the agent's
// record (only the deviceId) still finds the agent, with a second ReadKey.
func TestLookupOldKeyIndex(t *testing.T) {
	store := &keyReads{Store: memstore.New()}
	a := newTestAgent(t, "old-index", "old-index")
	humanID := newHarnessOn(t, store).register(t, a, "owner")
	err := store.Update(t.Context(), func(txn storage.Txn) error {
		return txn.Set(publicKeyKey(a.pub), []byte(a.deviceID), 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessOn(t, store)
	primeFreshness(t, h)
	store.reads.Store(0)
	l, err := h.reg.LookupPublicKey(t.Context(), a.pub)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Registered || l.HumanID != humanID {
		t.Errorf("lookup = %+v, want registered to %s", l, humanID)
	}
	if r := store.reads.Load(); r != 2 {
		t.Errorf("%d ReadKeys, want 2 (the index, then the agent)", r)
	}
}
