package keys

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Scheduled rotation. Every instance on a store runs Schedule; each rotation is a
// transaction conditioned on the stored active key's age, so however many
// instances find a key due at once, one rotates it and the others, run again by
// the store after the conflict on keylock/{alg}, find the new key young and do
// nothing. The others then see the new key through Watch or Lookup.

// MaintainInterval is how often Schedule looks for due work. A look that finds
// none reads nothing from the store (the loaded keys tell), so it may be short.
const MaintainInterval = time.Second

// maintainTimeout bounds one round of Maintain.
const maintainTimeout = time.Minute

// Report is what a round of Maintain did.
type Report struct {
	// Rotated are the keys it made active, at most one per algorithm.
	Rotated []*Key
	// Dropped are the retired keys it deleted (without their private half).
	Dropped []*Key
}

// RotateIfDue makes a new key the active one for alg when the stored active key is
// at least every old, and returns it. It returns nil, and rotates nothing, when the
// active key is younger (another instance may have just rotated it).
func (s *Set) RotateIfDue(ctx context.Context, alg string, every time.Duration) (*Key, error) {
	if err := s.Reload(ctx); err != nil {
		return nil, err
	}
	if every > 0 && !s.due(alg, every, s.now()) {
		return nil, nil
	}
	k, err := s.rotateIfDue(ctx, alg, every)
	if err != nil {
		return nil, err
	}
	return k, s.Reload(ctx) // the new key, ours or the one another instance stored meanwhile
}

// rotateIfDue is RotateIfDue on the loaded keys: it generates a key only when they
// say the rotation is due, and stores it only when the store agrees.
func (s *Set) rotateIfDue(ctx context.Context, alg string, every time.Duration) (*Key, error) {
	if every <= 0 {
		return nil, fmt.Errorf("rotation interval %s: must be positive", every)
	}
	if !s.due(alg, every, s.now()) {
		return nil, nil
	}
	return s.create(ctx, alg, func(actives []record, k *Key) bool {
		for _, r := range actives {
			if k.Created.Sub(r.Created) < every {
				return false // rotated meanwhile, by another instance
			}
		}
		return true
	})
}

// due reports whether the loaded active key of alg is at least every old.
func (s *Set) due(alg string, every time.Duration, now time.Time) bool {
	k := s.Active(alg)
	return k == nil || now.Sub(k.Created) >= every
}

// Maintain does one round of key maintenance: when every is positive, it rotates
// the key of each algorithm whose active key is at least every old
// (RotateIfDue); and it deletes the retired keys past their drop time (Prune). It
// reads the store only when the loaded keys (at most ReloadInterval old, see
// Watch) say something is due.
func (s *Set) Maintain(ctx context.Context, every time.Duration) (Report, error) {
	var rep Report
	now := s.now()
	var due []string
	if every > 0 {
		for _, alg := range Algorithms {
			if s.due(alg, every, now) {
				due = append(due, alg)
			}
		}
	}
	prune := s.pruneDue(now)
	if len(due) == 0 && !prune {
		return rep, nil
	}
	// The loaded keys may be ReloadInterval old: read the store before generating a
	// key (an RSA one costs up to seconds of CPU) that another instance's rotation
	// has made useless.
	if err := s.Reload(ctx); err != nil {
		return rep, fmt.Errorf("reloading signing keys: %w", err)
	}
	var errs []error
	for _, alg := range due {
		k, err := s.rotateIfDue(ctx, alg, every)
		if err != nil {
			errs = append(errs, fmt.Errorf("rotating the %s key: %w", alg, err))
		} else if k != nil {
			rep.Rotated = append(rep.Rotated, k)
		}
	}
	if prune {
		dropped, err := s.Prune(ctx)
		errs = append(errs, err)
		rep.Dropped = dropped
	}
	if err := s.Reload(ctx); err != nil {
		errs = append(errs, fmt.Errorf("reloading signing keys: %w", err))
	}
	return rep, errors.Join(errs...)
}

// Schedule runs Maintain every check until ctx is done, and hands report the
// outcome of each round that rotated or dropped a key, or failed (a failed round
// is tried again at the next check).
func (s *Set) Schedule(ctx context.Context, every, check time.Duration, report func(Report, error)) {
	t := time.NewTicker(check)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			rctx, cancel := context.WithTimeout(ctx, maintainTimeout)
			rep, err := s.Maintain(rctx, every)
			cancel()
			if ctx.Err() != nil {
				return // stopped during the round: not a failure
			}
			if report != nil && (err != nil || len(rep.Rotated) > 0 || len(rep.Dropped) > 0) {
				report(rep, err)
			}
		}
	}
}
