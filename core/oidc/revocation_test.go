package oidc

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/bounded"
	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/storagetest"
)

// TestRevocationsAcrossInstances: a revocation stored by one instance is honoured by
// another whose set is RevocationMaxAge old, without waiting for the background
// refresh; and a set that old which cannot be read again admits nothing.
func TestRevocationsAcrossInstances(t *testing.T) {
	h := newHarness(t)
	store := &storagetest.DownStore{Store: h.store}
	ctx := context.Background()
	other, err := newRevocations(ctx, store, h.clock.Now) // the other instance's set
	if err != nil {
		t.Fatal(err)
	}
	revoked := func() (bool, error) { return other.Revoked(ctx, "grant-1") }

	// This instance revokes; the other's set predates it.
	until := h.clock.Now().Add(time.Hour)
	if err := h.store.Update(ctx, func(txn storage.Txn) error {
		return putRevoked(txn, "grant-1", until, h.clock.Now())
	}); err != nil {
		t.Fatal(err)
	}
	if ok, err := revoked(); ok || err != nil {
		t.Fatalf("a fresh set: revoked %v, %v; want false (the revocation is newer than the set)", ok, err)
	}
	h.clock.Advance(RevocationMaxAge)
	if ok, err := revoked(); !ok || err != nil {
		t.Fatalf("a set %s old: revoked %v, %v; want true, read again before answering", RevocationMaxAge, ok, err)
	}

	// The database goes down: the set is answered until it is RevocationMaxAge old,
	// then every check fails with ErrUnavailable, one store read per revocationRetry.
	store.Down.Store(true)
	h.clock.Advance(RevocationMaxAge - time.Millisecond)
	if ok, err := revoked(); !ok || err != nil {
		t.Errorf("within the bound: revoked %v, %v; want true from the set", ok, err)
	}
	if ok, err := other.Revoked(ctx, "grant-2"); ok || err != nil {
		t.Errorf("within the bound, another grant: revoked %v, %v; want false from the set", ok, err)
	}
	h.clock.Advance(time.Millisecond)
	for other.set.Refreshing() { // a background read the checks above started
		time.Sleep(time.Millisecond)
	}
	before := store.Views.Load()
	for i := range 3 {
		if ok, err := other.Revoked(ctx, "grant-2"); ok || !errors.Is(err, storage.ErrUnavailable) {
			t.Fatalf("past the bound, store down, check %d: revoked %v, %v; want an error wrapping storage.ErrUnavailable", i, ok, err)
		}
	}
	if n := store.Views.Load() - before; n != 1 {
		t.Errorf("3 checks past the bound tried %d store reads, want 1 (then the failure is answered for %s)", n, revocationRetry)
	}

	// The database is back: the next check after revocationRetry reads it.
	store.Down.Store(false)
	h.clock.Advance(revocationRetry)
	if ok, err := other.Revoked(ctx, "grant-2"); ok || err != nil {
		t.Errorf("store back: revoked %v, %v; want false, no error", ok, err)
	}
	if ok, err := revoked(); !ok || err != nil {
		t.Errorf("store back: grant-1 revoked %v, %v; want true", ok, err)
	}

	// A check whose request was cancelled fails alone: the next one reads the store.
	h.clock.Advance(RevocationMaxAge)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := other.Revoked(cancelled, "grant-2"); err == nil {
		t.Errorf("a cancelled check past the bound: no error")
	}
	if ok, err := revoked(); !ok || err != nil {
		t.Errorf("after a cancelled check: revoked %v, %v; want true (its failure is not answered to others)", ok, err)
	}
}

// BenchmarkRevocationAdd: a revocation costs a copy of this interval's own
// revocations, not of the whole set (10,000 revoked grants held here).
func BenchmarkRevocationAdd(b *testing.B) {
	r := &revocations{now: time.Now}
	read := make(map[string]time.Time, 10000)
	for i := range 10000 {
		read[strconv.Itoa(i)] = time.Now().Add(time.Hour)
	}
	r.set = bounded.New(bounded.Config[revokedSet]{
		Load:  func(context.Context) (revokedSet, error) { return revokedSet{read: read}, nil },
		Merge: r.merge, Now: time.Now, Refresh: time.Hour, MaxAge: time.Hour, Retry: time.Second,
	})
	if _, err := r.set.Get(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		if i%100 == 0 { // a read every 100 revocations starts recent anew
			b.StopTimer()
			r.set = bounded.New(bounded.Config[revokedSet]{
				Load:  func(context.Context) (revokedSet, error) { return revokedSet{read: read}, nil },
				Merge: r.merge, Now: time.Now, Refresh: time.Hour, MaxAge: time.Hour, Retry: time.Second,
			})
			_, _ = r.set.Get(context.Background())
			b.StartTimer()
		}
		r.add("g"+strconv.Itoa(i), time.Now().Add(time.Hour))
	}
}
