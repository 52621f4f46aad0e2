package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/palmgate/palmgate/storage"
)

// Update runs fn in a SERIALIZABLE transaction and commits it when fn returns nil.
// When the transaction fails with a serialization failure or a deadlock (at any
// statement or at commit, whatever fn returned), fn runs again from scratch in a new
// transaction after a jittered, exponentially growing pause; after 8 attempts it runs
// while no other Update of this store does; after 32 attempts in all Update gives up
// with an error wrapping storage.ErrConflict. A connection lost before the commit
// was asked for is retried twice on another connection. Errors reaching the database
// wrap storage.ErrUnavailable. ctx bounds the whole, pauses and the wait for a
// group (group.go) included; in a group, a context that ends before the group
// commits makes the Update leave it, committing nothing. fn must not wait for
// another Update of this store, which may be waiting for fn's group.
func (s *Store) Update(ctx context.Context, fn func(storage.Txn) error) error {
	if s.obs != nil {
		defer storage.ObserveSince(s.obs, storage.OpUpdate, time.Now())
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	if !s.noGroups {
		return s.updateGrouped(ctx, fn)
	}
	return s.update(ctx, fn)
}

// update is Update on its own: fn's attempts in transactions of their own.
func (s *Store) update(ctx context.Context, fn func(storage.Txn) error) error {
	unavailable := 0
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("pgstore: update: %w", err)
		}
		retry, err := s.attempt(ctx, fn, attempt > optimisticAttempts)
		switch retry {
		case noRetry:
			return err
		case retryUnavailable:
			if unavailable++; unavailable > maxUnavailableRetries {
				return err
			}
		case retryConflict:
			if attempt >= s.maxAttempts {
				s.conflicts.Add(1)
				return fmt.Errorf("pgstore: update still conflicting after %d attempts: %w: %w",
					s.maxAttempts, storage.ErrConflict, err)
			}
			s.conflictRetry()
		}
		s.retries.Add(1)
		if err := storage.Sleep(ctx, retryPause.Before(attempt)); err != nil {
			return fmt.Errorf("pgstore: update: %w", err)
		}
	}
}

// retryKind says whether and why an attempt should be run again.
type retryKind int

const (
	noRetry retryKind = iota
	retryConflict
	retryUnavailable
)

// Transactions begin with these statements (sent with their first statement).
const (
	beginUpdate = `BEGIN ISOLATION LEVEL SERIALIZABLE`
	beginView   = `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`
)

// attempt runs fn once in a new SERIALIZABLE transaction and commits it.
func (s *Store) attempt(ctx context.Context, fn func(storage.Txn) error, exclusive bool) (retryKind, error) {
	if exclusive {
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
	} else {
		s.writeMu.RLock()
		defer s.writeMu.RUnlock()
	}
	tx, err := s.newTxn(ctx, beginUpdate, false)
	if err != nil {
		return retryOf(err), err
	}
	defer tx.end()
	fnErr := fn(tx)
	tx.done = true
	if tx.err != nil {
		// The transaction failed at a statement and is aborted, whatever fn made of
		// the error: retry it, or report the failure rather than what fn returned.
		return retryOf(tx.err), tx.err
	}
	if fnErr != nil {
		return noRetry, fnErr
	}
	if err := tx.commit(); err != nil {
		if errors.Is(err, storage.ErrUnavailable) {
			// The commit may have happened: running fn again could apply it twice.
			return noRetry, fmt.Errorf("%w (the transaction may or may not have committed)", err)
		}
		return retryOf(err), err
	}
	return noRetry, nil
}

// retryOf says whether an error wrapped by wrap is worth another attempt: a
// serialization failure or deadlock, or a lost connection (which another one from the
// pool may replace), but not a timeout or an overloaded server, which retrying would
// only make slower to report.
func retryOf(err error) retryKind {
	switch {
	case errors.Is(err, errRetryable):
		return retryConflict
	case errors.Is(err, storage.ErrUnavailable) && connectionLost(err):
		return retryUnavailable
	}
	return noRetry
}
