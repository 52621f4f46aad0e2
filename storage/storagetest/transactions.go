package storagetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palmgate/palmgate/storage"
)

// Transactions: Updates that race. A store must behave as if its Updates ran one
// after the other (serializable): a transaction that read what a concurrent one
// wrote commits only if some serial order of the two gives the same result, and is
// otherwise run again (or fails with storage.ErrConflict).

// transactionTests are the concurrent behaviours, each on a fresh store.
var transactionTests = []subTest{
	{"AtomicIncrement", testAtomicIncrement},
	{"WriteSkew", func(t *testing.T, s storage.Store) { writeSkew(t, s, s, false) }},
}

// RunInstances runs the write-skew test across two handles of one storage, as two
// instances of palmgate on one database hold: newStores returns two stores (two
// connection pools, say) over the same fresh, empty storage. Their Updates can
// overlap, and the test makes them: each transaction reads both keys before either
// commits. The suite closes both stores.
func RunInstances(t *testing.T, newStores func(t *testing.T) (storage.Store, storage.Store)) {
	t.Run("WriteSkewAcrossInstances", func(t *testing.T) {
		a, b := newStores(t)
		for _, s := range []storage.Store{a, b} {
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
		}
		writeSkew(t, a, b, true)
	})
}

// testAtomicIncrement: concurrent read-modify-write Updates of one key lose no
// increment.
func testAtomicIncrement(t *testing.T, s storage.Store) {
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
}

// writeSkew is the classic anomaly of snapshot isolation: two people are on call
// (alice and bob) and at least one must stay. Each transaction reads both keys and,
// seeing the other still on call, takes its own person off: each is valid alone,
// but if both commit from the same snapshot nobody is on call. Transaction A runs on
// store a, B on store b. A serializable store runs one of them again (which then
// sees the other's write and changes nothing) or fails it with ErrConflict.
//
// With mustOverlap the two transactions are made to overlap: each waits, after its
// reads, until the other has read too, so that both read the initial state. Without
// it they are started together and overlap when the store lets them (a store may
// run one process's Updates one at a time: Badger's group commit, memstore's lock),
// waiting for each other only briefly.
func writeSkew(t *testing.T, a, b storage.Store, mustOverlap bool) {
	set(t, a, "oncall/alice", "on", 0)
	set(t, a, "oncall/bob", "on", 0)

	var (
		mu      sync.Mutex
		arrived int
		met     = make(chan struct{})
		runs    [2]atomic.Int32
	)
	wait := 100 * time.Millisecond
	if mustOverlap {
		wait = time.Minute // a bound a loaded machine meets: they meet at once
	}
	// arrive is the barrier of the first runs: it reports whether both were in
	// their first run, past their reads and not committed, at the same time. The
	// first to arrive gives up after wait; a later arrival then meets no one.
	var gaveUp bool
	arrive := func() bool {
		mu.Lock()
		arrived++
		if arrived == 2 {
			ok := !gaveUp
			if ok {
				close(met)
			}
			mu.Unlock()
			return ok
		}
		mu.Unlock()
		select {
		case <-met:
			return true
		case <-time.After(wait):
		}
		mu.Lock()
		defer mu.Unlock()
		select {
		case <-met: // the other arrived as the wait ended
			return true
		default:
			gaveUp = true
			return false
		}
	}
	var overlapped atomic.Bool
	goOff := func(i int, me, other string) func(storage.Txn) error {
		return func(tx storage.Txn) error {
			run := runs[i].Add(1)
			mine, err := tx.Get([]byte(me))
			if err != nil {
				return fmt.Errorf("Get(%s): %w", me, err)
			}
			theirs, err := tx.Get([]byte(other))
			if err != nil {
				return fmt.Errorf("Get(%s): %w", other, err)
			}
			if run == 1 && arrive() {
				overlapped.Store(true)
			}
			if string(mine) == "on" && string(theirs) == "on" {
				return tx.Set([]byte(me), []byte("off"), 0)
			}
			return nil
		}
	}
	var wg sync.WaitGroup
	var errs [2]error
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	wg.Go(func() { errs[0] = a.Update(ctx, goOff(0, "oncall/alice", "oncall/bob")) })
	wg.Go(func() { errs[1] = b.Update(ctx, goOff(1, "oncall/bob", "oncall/alice")) })
	wg.Wait()

	committed := 0
	for i, err := range errs {
		switch {
		case err == nil:
			committed++
		case errors.Is(err, storage.ErrConflict):
			t.Logf("transaction %d failed with a conflict, as it may", i)
		default:
			t.Errorf("transaction %d: %v", i, err)
		}
	}
	if mustOverlap && !overlapped.Load() {
		t.Fatal("the two transactions did not overlap: the test proves nothing")
	}
	on := 0
	for _, k := range []string{"oncall/alice", "oncall/bob"} {
		if v, err := get(t, a, k); err != nil {
			t.Fatalf("Get(%s): %v", k, err)
		} else if string(v) == "on" {
			on++
		}
	}
	if on == 0 {
		t.Fatalf("write skew: both transactions committed from one snapshot (runs %d and %d) and nobody is on call", runs[0].Load(), runs[1].Load())
	}
	if on != 1 && committed == 2 {
		t.Errorf("%d on call after two committed transactions, want 1: the first to commit takes its person off", on)
	}
	if overlapped.Load() && committed == 2 && runs[0].Load()+runs[1].Load() < 3 {
		t.Errorf("both overlapping transactions committed at their first run: one read what the other wrote")
	}
}
