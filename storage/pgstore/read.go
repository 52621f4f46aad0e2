package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/palmgate/palmgate/storage"
)

// View runs fn in a REPEATABLE READ, READ ONLY transaction: one snapshot of the
// database for the whole of fn. Set and Delete inside it return an error. fn runs
// once; a connection lost before its first read was answered is replaced by another.
func (s *Store) View(ctx context.Context, fn func(storage.Txn) error) error {
	if s.obs != nil {
		defer storage.ObserveSince(s.obs, storage.OpView, time.Now())
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: view: %w", err)
	}
	tx, err := s.newTxn(ctx, beginView, true)
	if err != nil {
		return err
	}
	defer tx.end()
	fnErr := fn(tx)
	tx.done = true
	if tx.err != nil {
		if errors.Is(tx.err, errRetryable) {
			return fmt.Errorf("%w: %w", storage.ErrConflict, tx.err)
		}
		return tx.err
	}
	if fnErr != nil {
		return fnErr
	}
	// Ending a read-only transaction commits nothing; its failure (a connection
	// lost after fn read everything) changes nothing either.
	tx.commit()
	return nil
}

// ReadKey returns the value of key, or storage.ErrNotFound, with one statement
// outside a transaction (a snapshot of its own): what a View with one Get returns,
// in one round trip instead of two. A connection lost before the answer is
// replaced by another, as for a View.
func (s *Store) ReadKey(ctx context.Context, key []byte) ([]byte, error) {
	if s.obs != nil {
		defer storage.ObserveSince(s.obs, storage.OpReadKey, time.Now())
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("pgstore: read: %w", err)
		}
		v, err := s.readKey(ctx, key)
		if err == nil || errors.Is(err, storage.ErrNotFound) {
			return v, err
		}
		if retryOf(err) != retryUnavailable || attempt > maxUnavailableRetries {
			return nil, err
		}
		s.retries.Add(1)
		if err := storage.Sleep(ctx, retryPause.Before(attempt)); err != nil {
			return nil, fmt.Errorf("pgstore: read: %w", err)
		}
	}
}

func (s *Store) readKey(ctx context.Context, key []byte) ([]byte, error) {
	bctx, cancel := s.bound(ctx)
	defer cancel()
	s.roundTrips.Add(1)
	var v []byte
	switch err := s.pool.QueryRow(bctx, sqlGet, key).Scan(&v); {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, storage.ErrNotFound
	case err != nil:
		return nil, s.wrap(ctx, "read", err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}
