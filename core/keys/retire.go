package keys

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/palmgate/palmgate/storage"
)

// Retirement. A key that stops being active (a rotation) is retired at that time.
// Tokens it signed before keep verifying: its public half stays in the JWKS, and
// Lookup finds it, until every token it may have signed has expired: its
// algorithm's longest token lifetime (WithLifetimes) after its retirement, plus
// RetireMargin. Then it is dropped: left out of the JWKS and of Lookup at once,
// and deleted from the store by Prune.

// RetireMargin is added to a retired key's longest token lifetime before it is
// dropped. It covers what may sign with, or accept, the key after its retirement:
// another instance signs with the old key until its watcher reloads
// (ReloadInterval), a resource server running palmgate_bearer against this issuer
// admits tokens up to its leeway (30 s by default) past their exp, and clocks
// differ a little.
const RetireMargin = time.Minute

// WithLifetimes tells the Set how long after its signing a token of each
// algorithm's keys may still be used (core/oidc's KeyLifetimes: ES256 refresh
// tokens, and ID tokens as logout hints, outlive the access tokens). A key of alg retired at R is dropped at R +
// lifetimes[alg] + RetireMargin. Without it (or for an algorithm it lacks), retired
// keys are kept forever.
func WithLifetimes(lifetimes map[string]time.Duration) Option {
	return func(s *Set) {
		s.lifetimes = make(map[string]time.Duration, len(lifetimes))
		for alg, d := range lifetimes {
			s.lifetimes[alg] = d
		}
	}
}

// lifecycle is when a stored key was retired and when it is dropped; zero times
// while it is active (and, for drops, when its lifetime is unknown).
type lifecycle struct {
	retired, drops time.Time
}

func (lc lifecycle) dropped(now time.Time) bool { return !lc.drops.IsZero() && !now.Before(lc.drops) }

func (k *Key) dropped(now time.Time) bool { return lifecycle{k.Retired, k.DropsAt}.dropped(now) }

// lifecycles returns the lifecycle of each of recs (the stored keys, of every
// algorithm). A retired key stored by a version that did not record retirements
// was retired when the next key of its algorithm was created: every rotation
// created the key that replaced it. One with no later key is kept.
func (s *Set) lifecycles(recs []record) []lifecycle {
	out := make([]lifecycle, len(recs))
	for i, r := range recs {
		if r.Active {
			continue
		}
		retired := r.Retired
		if retired.IsZero() {
			for _, o := range recs {
				if o.Algorithm == r.Algorithm && o.ID != r.ID && !o.Created.Before(r.Created) &&
					(retired.IsZero() || o.Created.Before(retired)) {
					retired = o.Created
				}
			}
		}
		out[i].retired = retired
		if life, ok := s.lifetimes[r.Algorithm]; ok && !retired.IsZero() {
			out[i].drops = retired.Add(life + RetireMargin)
		}
	}
	return out
}

// Prune deletes the retired keys past their drop time from the store, and returns
// them (without their private half). Several instances may prune at once: each
// deletes what it finds, in one transaction.
func (s *Set) Prune(ctx context.Context) ([]*Key, error) {
	var dropped []*Key
	err := s.store.Update(ctx, func(txn storage.Txn) error {
		dropped = dropped[:0]
		var recs []record
		err := txn.Iterate(keysPrefix(), func(key, value []byte) (bool, error) {
			var r record
			if err := json.Unmarshal(value, &r); err != nil {
				return false, fmt.Errorf("decoding key %s: %w", key, err)
			}
			recs = append(recs, r)
			return true, nil
		})
		if err != nil {
			return err
		}
		now := s.now()
		for i, lc := range s.lifecycles(recs) {
			if !lc.dropped(now) {
				continue
			}
			r := recs[i]
			if err := txn.Delete(keyKey(r.Algorithm, r.ID)); err != nil {
				return err
			}
			dropped = append(dropped, &Key{ID: r.ID, Algorithm: r.Algorithm, Created: r.Created, Retired: lc.retired, DropsAt: lc.drops})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("deleting retired signing keys: %w", err)
	}
	return dropped, nil
}

// pruneDue reports whether a loaded key is past its drop time (and so whether
// Prune has work to do, as far as this instance knows).
func (s *Set) pruneDue(now time.Time) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, k := range s.byKID {
		if k.dropped(now) {
			return true
		}
	}
	return false
}

// List returns the loaded keys (those not yet dropped), by algorithm (in the
// order of Algorithms) and newest first.
func (s *Set) List() []*Key {
	now := s.now()
	s.mu.RLock()
	out := make([]*Key, 0, len(s.byKID))
	for _, k := range s.byKID {
		if !k.dropped(now) {
			out = append(out, k)
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Key) int {
		if c := slices.Index(Algorithms, a.Algorithm) - slices.Index(Algorithms, b.Algorithm); c != 0 {
			return c
		}
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}
