package oidc

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"time"

	"github.com/palmgate/palmgate/core/bounded"
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
// Staleness (core/bounded): the set is re-read in the background once it is
// revocationRefresh old, and a check never answers from a set older than
// RevocationMaxAge (it reads the store, or fails). This instance's own revocations
// are in the set at once. So no instance admits a token whose grant another
// instance revoked more than RevocationMaxAge ago.
type revocations struct {
	store storage.Store
	now   func() time.Time
	set   *bounded.Value[revokedSet]
}

// revokedSet is the set of revoked grants, each with when its revocation expires:
// read is the set as last read from the store, recent this instance's own
// revocations since. A set once held is never modified (checks read it without a
// lock): add copies recent alone, which holds only the revocations of the last
// read's interval, so a revocation costs a copy of a few entries, not of the set.
type revokedSet struct {
	read, recent map[string]time.Time
}

// expiry returns when grantID's revocation expires, if it was revoked.
func (s revokedSet) expiry(grantID string) (time.Time, bool) {
	if exp, ok := s.recent[grantID]; ok {
		return exp, true
	}
	exp, ok := s.read[grantID]
	return exp, ok
}

func newRevocations(ctx context.Context, store storage.Store, now func() time.Time) (*revocations, error) {
	r := &revocations{store: store, now: now}
	r.set = bounded.New(bounded.Config[revokedSet]{
		Load: r.load, Merge: r.merge, Now: now,
		Refresh: revocationRefresh, MaxAge: RevocationMaxAge, Retry: revocationRetry,
	})
	_, err := r.set.Get(ctx)
	return r, err
}

// Revoked reports whether grantID was revoked, or an error wrapping
// storage.ErrUnavailable when the set is older than RevocationMaxAge and cannot be
// read again.
func (r *revocations) Revoked(ctx context.Context, grantID string) (bool, error) {
	set, err := r.set.Get(ctx)
	if err != nil {
		return false, err
	}
	exp, ok := set.expiry(grantID)
	return ok && r.now().Before(exp), nil
}

// add records a revocation made by this instance at once.
func (r *revocations) add(grantID string, until time.Time) {
	r.set.Update(func(set revokedSet) revokedSet {
		recent := make(map[string]time.Time, len(set.recent)+1)
		maps.Copy(recent, set.recent)
		recent[grantID] = until
		return revokedSet{read: set.read, recent: recent}
	})
}

// load reads the set from the store.
func (r *revocations) load(ctx context.Context) (revokedSet, error) {
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
		return revokedSet{}, fmt.Errorf("%w: the revocation set cannot be refreshed: %w", storage.ErrUnavailable, err)
	}
	return revokedSet{read: fresh}, nil
}

// merge keeps, in a set just read, the revocations this instance added that the
// read may have missed (those it made while the store was being read; nothing is
// ever un-revoked), and starts recent anew.
func (r *revocations) merge(held, loaded revokedSet) revokedSet {
	now := r.now()
	for id, exp := range held.recent {
		if _, ok := loaded.read[id]; !ok && now.Before(exp) {
			loaded.read[id] = exp
		}
	}
	return loaded
}

// putRevoked stores the revocation of grantID until the last access token it could
// have issued expires.
func putRevoked(txn storage.Txn, grantID string, until time.Time, now time.Time) error {
	return txn.Set(revokedKey(grantID), binary.BigEndian.AppendUint64(nil, uint64(until.UnixMilli())), max(until.Sub(now), time.Second))
}
