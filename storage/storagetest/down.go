package storagetest

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/palmgate/palmgate/storage"
)

// ErrDown is the error of every call of a DownStore while it is down: it wraps
// storage.ErrUnavailable, as pgstore's errors do when the server is unreachable.
var ErrDown = fmt.Errorf("pgstore: begin on db:5432: %w: connection refused", storage.ErrUnavailable)

// DownStore wraps a Store whose database can be taken away, for the tests of
// what uses a store. While Down is set, every View and Update fails at once
// with ErrDown. DownAfterUpdate takes it down as soon as the next Update has
// run: a database that goes away between a write and what follows it. Views
// and Updates count the calls tried. A cancelled context fails a call first,
// as it does with a real backend.
type DownStore struct {
	storage.Store
	Down            atomic.Bool
	DownAfterUpdate atomic.Bool
	Views, Updates  atomic.Int64
}

// View is the wrapped store's View, unless the store is down.
func (s *DownStore) View(ctx context.Context, fn func(storage.Txn) error) error {
	if err := s.refuse(ctx, &s.Views); err != nil {
		return err
	}
	return s.Store.View(ctx, fn)
}

// Update is the wrapped store's Update, unless the store is down.
func (s *DownStore) Update(ctx context.Context, fn func(storage.Txn) error) error {
	if err := s.refuse(ctx, &s.Updates); err != nil {
		return err
	}
	err := s.Store.Update(ctx, fn)
	if s.DownAfterUpdate.Load() {
		s.Down.Store(true)
	}
	return err
}

// refuse counts a call and returns why it fails before reaching the store, if
// it does: its context is done, or the store is down.
func (s *DownStore) refuse(ctx context.Context, calls *atomic.Int64) error {
	calls.Add(1)
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.Down.Load() {
		return ErrDown
	}
	return nil
}
