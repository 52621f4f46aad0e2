package oidc

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/palmgate/palmgate/storage"
)

// revocationRefresh is how often the revocation set is re-read from the store in the
// background, so that a revocation made by another instance is honoured within that
// time while the store answers.
const revocationRefresh = time.Second

// RevocationMaxAge bounds the age of the revocation set a token is admitted on: a
// revocation (a logout, a reused code or refresh token) committed by any instance
// sharing the store is honoured by every instance within this time. Past it, a
// check reads the store itself, and when the store cannot be read the check fails
// (the edge answers 503 with Retry-After) rather than admit a token on an old set.
const RevocationMaxAge = 2 * time.Second

// revocationRetry is how long a failed read of the set is answered to the checks
// that wait on it before the store is tried again, so that a database outage costs
// one read attempt per interval, not one per request.
const revocationRetry = 250 * time.Millisecond

// revocations is the set of revoked grants whose access tokens may still be alive.
// It lives in the store (oidc/revoked/{grantId}, expiring with the last access token
// of the grant) and in memory: checking a token costs a map lookup, not a store
// read.
//
// Staleness: the set is re-read in the background once it is revocationRefresh old,
// and a check never answers from a set older than RevocationMaxAge (it reads the
// store, or fails). This instance's own revocations are in the set at once. So no
// instance admits a token whose grant another instance revoked more than
// RevocationMaxAge ago.
type revocations struct {
	store storage.Store
	now   func() time.Time

	mu      sync.RWMutex
	expires map[string]time.Time
	loaded  time.Time // when the read of the current set started

	refreshing atomic.Bool

	loadMu   sync.Mutex // one foreground read at a time; guards the fields below
	failedAt time.Time  // of the last failed foreground read
	failed   error
}

func newRevocations(ctx context.Context, store storage.Store, now func() time.Time) (*revocations, error) {
	r := &revocations{store: store, now: now}
	return r, r.load(ctx)
}

// Revoked reports whether grantID was revoked, or an error wrapping
// storage.ErrUnavailable when the set is older than RevocationMaxAge and cannot be
// read again.
func (r *revocations) Revoked(ctx context.Context, grantID string) (bool, error) {
	now := r.now()
	r.mu.RLock()
	age := now.Sub(r.loaded)
	r.mu.RUnlock()
	switch {
	case age >= RevocationMaxAge || age < 0:
		if err := r.refresh(ctx); err != nil {
			return false, err
		}
	case age >= revocationRefresh && r.refreshing.CompareAndSwap(false, true):
		go func() {
			defer r.refreshing.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = r.load(ctx) // on failure the old set stays; a check past its bound reads it
		}()
	}
	r.mu.RLock()
	exp, ok := r.expires[grantID]
	r.mu.RUnlock()
	return ok && now.Before(exp), nil
}

// refresh reads the set in the foreground unless another check just did, or just
// failed to (then its error is answered for revocationRetry).
func (r *revocations) refresh(ctx context.Context) error {
	r.loadMu.Lock()
	defer r.loadMu.Unlock()
	now := r.now()
	r.mu.RLock()
	age := now.Sub(r.loaded)
	r.mu.RUnlock()
	if age >= 0 && age < RevocationMaxAge {
		return nil // read by the check we waited for
	}
	if r.failed != nil && now.Sub(r.failedAt) < revocationRetry && !now.Before(r.failedAt) {
		return r.failed
	}
	if err := r.load(ctx); err != nil {
		err = fmt.Errorf("%w: the revocation set cannot be refreshed: %w", storage.ErrUnavailable, err)
		if ctx.Err() == nil { // not this caller's own cancellation: answer it to the others too
			r.failed, r.failedAt = err, now
		}
		return err
	}
	r.failed = nil
	return nil
}

// add records a revocation made by this instance at once.
func (r *revocations) add(grantID string, until time.Time) {
	r.mu.Lock()
	r.expires[grantID] = until
	r.mu.Unlock()
}

func (r *revocations) load(ctx context.Context) error {
	loadedAt := r.now()
	fresh := map[string]time.Time{}
	err := r.store.View(ctx, func(txn storage.Txn) error {
		clear(fresh)
		prefix := revokedPrefix()
		return txn.Iterate(prefix, func(key, value []byte) (bool, error) {
			if len(value) == 8 {
				fresh[string(key[len(prefix):])] = time.UnixMilli(int64(binary.BigEndian.Uint64(value)))
			}
			return true, nil
		})
	})
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// Keep revocations this instance added while the store was being read.
	for id, exp := range r.expires {
		if _, ok := fresh[id]; !ok && loadedAt.Before(exp) {
			fresh[id] = exp
		}
	}
	if loadedAt.Before(r.loaded) {
		// A read that started later has already been installed: keep it, with
		// what this one found besides (nothing is ever un-revoked).
		for id, exp := range fresh {
			if _, ok := r.expires[id]; !ok {
				r.expires[id] = exp
			}
		}
		return nil
	}
	r.expires, r.loaded = fresh, loadedAt
	return nil
}

// putRevoked stores the revocation of grantID until the last access token it could
// have issued expires.
func putRevoked(txn storage.Txn, grantID string, until time.Time, now time.Time) error {
	return txn.Set(revokedKey(grantID), binary.BigEndian.AppendUint64(nil, uint64(until.UnixMilli())), max(until.Sub(now), time.Second))
}
