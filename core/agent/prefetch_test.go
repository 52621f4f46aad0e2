package agent

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/memstore"
)

// coldReads wraps a Store: its Updates count the Gets that neither a Prefetch nor a
// write of the same transaction covered. On a database server each of those is a
// round trip of its own.
type coldReads struct {
	storage.Store
	n atomic.Int64
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
	for _, k := range keys {
		t.known[string(k)] = true
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
// the palm scan that completes it, read nothing they did not prefetch, so that on
// PostgreSQL each costs its few round trips (docs/PERFORMANCE.md).
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
		h.scan(t, s, "owner-"+address)
		if n := store.n.Swap(0); n != 0 {
			t.Errorf("completion (address %q): %d Gets not prefetched", address, n)
		}
		if got := h.session(t, s.ID); got.Status != SessionCompleted {
			t.Fatalf("session %s, want completed", got.Status)
		}
	}
}
