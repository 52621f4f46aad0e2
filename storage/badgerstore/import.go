package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/palmgate/palmgate/storage"
)

var _ storage.Importer = (*Store)(nil)

// ErrUnfinishedImport is wrapped by the error of Open for a store holding part
// of an import: one whose process died (killed, out of memory, a power cut)
// between its first committed batch and its last, so that nothing dropped the
// batches again.
var ErrUnfinishedImport = errors.New("badgerstore: an import into this store did not finish, so it holds only part of it (remove the directory and restore again)")

// importMarker is the record Import writes with its first batch and deletes with
// its last; no palmgate key begins with 0xff. Open refuses a store that holds it.
var importMarker = []byte("\xffbadgerstore/import-unfinished")

// Import writes every record src exports into the store, each expiring at its own
// ExpiresAt rounded up to a whole second (as Txn.Set rounds), and returns how many it
// wrote; records already expired are skipped. The store must hold no live record
// (otherwise the error wraps storage.ErrNotEmpty) and must not be in use: Import is
// for filling a new store (a restore), and concurrent Updates of this Store wait for
// it. Badger cannot commit a large import in one transaction, so Import commits
// batches as they fill up and, on any error (src's included), drops everything it
// wrote, leaving the store empty again: all or nothing, as storage.Importer asks.
// A process that dies between the first commit and the last cannot drop them:
// the store then holds importMarker, and Open refuses it (ErrUnfinishedImport).
func (s *Store) Import(ctx context.Context, src storage.Exporter) (int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, ErrClosed
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	defer s.watches.ChangedAll() // then, with the new snapshot, every watched prefix changed
	defer s.reads.retire()       // after the commits, and after DropAll on a failure
	empty := true
	err := s.db.View(func(btx *badger.Txn) error {
		it := btx.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		it.Rewind()
		empty = !it.Valid()
		return nil
	})
	if err != nil {
		return 0, mapErr("import: checking the store is empty", err)
	}
	if !empty {
		return 0, fmt.Errorf("badgerstore: import into %s: %w", s.dir, storage.ErrNotEmpty)
	}
	n, committed, err := s.importRecords(ctx, src)
	if err != nil && committed {
		if dropErr := s.db.DropAll(); dropErr != nil {
			return 0, fmt.Errorf("badgerstore: import: %w; emptying the store again failed too, so it may hold part of the import: remove %s (%w)",
				err, s.dir, dropErr)
		}
		return 0, fmt.Errorf("badgerstore: import (nothing kept): %w", err)
	}
	if err != nil {
		return 0, fmt.Errorf("badgerstore: import (nothing written): %w", err)
	}
	return n, nil
}

// importRecords writes src's records in as few transactions as Badger allows.
// committed reports that some were committed (on an error: that some must be
// removed again).
func (s *Store) importRecords(ctx context.Context, src storage.Exporter) (n int, committed bool, err error) {
	btx := s.db.NewTransaction(true)
	defer func() { btx.Discard() }()
	// Committed with the first batch, deleted with the last (in one transaction,
	// an import that needs only one never holds it).
	if err := btx.Set(importMarker, nil); err != nil {
		return 0, false, mapErr("import: set", err)
	}
	err = src.Export(ctx, func(r storage.Record) error {
		e := badger.NewEntry(r.Key, r.Value)
		if !r.ExpiresAt.IsZero() {
			now := time.Now()
			if !r.ExpiresAt.After(now) {
				return nil
			}
			e.ExpiresAt = expiresAt(now, r.ExpiresAt.Sub(now))
		}
		err := btx.SetEntry(e)
		if errors.Is(err, badger.ErrTxnTooBig) {
			committed = true // or perhaps, if Commit fails
			if err := btx.Commit(); err != nil {
				return mapErr("import: commit", err)
			}
			btx = s.db.NewTransaction(true)
			err = btx.SetEntry(e)
		}
		if err != nil {
			return mapErr("import: set", err)
		}
		n++
		return nil
	})
	if err != nil {
		return 0, committed, err
	}
	if err := btx.Delete(importMarker); errors.Is(err, badger.ErrTxnTooBig) {
		committed = true
		if err := btx.Commit(); err != nil {
			return 0, true, mapErr("import: commit", err)
		}
		btx = s.db.NewTransaction(true)
		err = btx.Delete(importMarker)
		if err != nil {
			return 0, true, mapErr("import: delete", err)
		}
	} else if err != nil {
		return 0, committed, mapErr("import: delete", err)
	}
	if err := btx.Commit(); err != nil {
		return 0, true, mapErr("import: commit", err)
	}
	return n, committed, nil
}

// refuseUnfinishedImport returns ErrUnfinishedImport when db holds the marker of
// an import that did not finish.
func refuseUnfinishedImport(db *badger.DB) error {
	return db.View(func(btx *badger.Txn) error {
		switch _, err := btx.Get(importMarker); {
		case err == nil:
			return ErrUnfinishedImport
		case errors.Is(err, badger.ErrKeyNotFound):
			return nil
		default:
			return fmt.Errorf("checking for an unfinished import: %w", err)
		}
	})
}
