package oidc

import (
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"

	"github.com/palmgate/palmgate/storage"
)

// revocationRefresh is how often the revocation set is re-read from the store, so
// that a revocation made by another instance is honoured within that time.
const revocationRefresh = time.Second

// revocations is the set of revoked grants whose access tokens may still be alive.
// It lives in the store (oidc/revoked/{grantId}, expiring with the last access token
// of the grant) and in memory, re-read at most once per revocationRefresh in the
// background: checking a token costs a map lookup, not a store read.
type revocations struct {
	store storage.Store
	now   func() time.Time

	mu      sync.RWMutex
	expires map[string]time.Time
	loaded  time.Time

	refreshing atomic.Bool
}

func newRevocations(ctx context.Context, store storage.Store, now func() time.Time) (*revocations, error) {
	r := &revocations{store: store, now: now}
	return r, r.load(ctx)
}

// Revoked reports whether grantID was revoked.
func (r *revocations) Revoked(grantID string) bool {
	now := r.now()
	r.mu.RLock()
	exp, ok := r.expires[grantID]
	stale := now.Sub(r.loaded) >= revocationRefresh
	r.mu.RUnlock()
	if stale && r.refreshing.CompareAndSwap(false, true) {
		go func() {
			defer r.refreshing.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = r.load(ctx) // on failure the old set stays; the next check retries
		}()
	}
	return ok && now.Before(exp)
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
	r.expires, r.loaded = fresh, loadedAt
	return nil
}

// putRevoked stores the revocation of grantID until the last access token it could
// have issued expires.
func putRevoked(txn storage.Txn, grantID string, until time.Time, now time.Time) error {
	return txn.Set(revokedKey(grantID), binary.BigEndian.AppendUint64(nil, uint64(until.UnixMilli())), max(until.Sub(now), time.Second))
}
