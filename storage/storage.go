// Package storage defines the small transactional, ordered key-value interface that
// palmgate's domain packages build their records and indexes on. It knows nothing of
// the domain: keys and values are bytes.
package storage

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is returned by Txn.Get when the key does not exist or has expired.
var ErrNotFound = errors.New("storage: key not found")

// ErrConflict is returned by Store.Update when a transaction kept conflicting with
// concurrent ones after every retry.
var ErrConflict = errors.New("storage: transaction conflict")

// ErrUnavailable is wrapped by the errors of a store whose backing database cannot be
// reached or does not answer in time (a database server that is down, restarting,
// unreachable or overloaded). The failure is expected to pass: the HTTP edge answers
// 503 Service Unavailable with Retry-After. Of an Update that fails this way after
// asking the database to commit, the outcome is unknown: it may have committed.
var ErrUnavailable = errors.New("storage: database unavailable")

// Store is a transactional, ordered key-value store. Implementations must make a
// successful Update durable before it returns (an answered write survives a crash),
// and must run fn again, from scratch, when a transaction conflicts with a
// concurrent one; fn must therefore not keep state across attempts.
type Store interface {
	// Update runs fn in a read-write transaction and commits it when fn returns nil.
	Update(ctx context.Context, fn func(Txn) error) error
	// View runs fn in a read-only transaction over a consistent snapshot.
	View(ctx context.Context, fn func(Txn) error) error
	// Close releases the store.
	Close() error
}

// Txn is one transaction. Values returned by Get and passed to Iterate callbacks
// belong to the caller (they stay valid after the transaction ends).
type Txn interface {
	// Get returns the value of key, or ErrNotFound.
	Get(key []byte) ([]byte, error)
	// Set stores value under key. A ttl above zero makes the record expire (disappear
	// from every read) after that long; zero keeps it until deleted.
	Set(key, value []byte, ttl time.Duration) error
	// Delete removes key; deleting a missing key is not an error.
	Delete(key []byte) error
	// Iterate calls fn for each live key that starts with prefix, in ascending byte
	// order, until fn returns false or an error (which Iterate returns).
	Iterate(prefix []byte, fn func(key, value []byte) (bool, error)) error
	// IterateKeys is Iterate without reading the values, for when only the keys
	// matter (counting, say).
	IterateKeys(prefix []byte, fn func(key []byte) (bool, error)) error
}

// Prefetcher is implemented by transactions whose reads each cost a round trip to a
// database server: Prefetch reads the keys in one and keeps the answers for the
// transaction's Gets of them. It changes no answer, only when the reading is done.
type Prefetcher interface {
	Prefetch(keys ...[]byte) error
}

// Prefetch tells txn that its Gets of keys are coming: a Txn that is a Prefetcher
// reads them together now; any other reads each when asked. An error is a failure
// of the transaction, as a Get's would be.
func Prefetch(txn Txn, keys ...[]byte) error {
	if p, ok := txn.(Prefetcher); ok {
		return p.Prefetch(keys...)
	}
	return nil
}

// DeletePrefix deletes every record under prefix in txn and counts them.
func DeletePrefix(txn Txn, prefix []byte) (int, error) {
	var keys [][]byte
	if err := txn.IterateKeys(prefix, func(k []byte) (bool, error) {
		keys = append(keys, append([]byte(nil), k...))
		return true, nil
	}); err != nil {
		return 0, err
	}
	for _, k := range keys {
		if err := txn.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}

// KeyReader is implemented by a Store that reads one key outside a transaction
// more cheaply than View does (on a database server: one round trip, not two).
type KeyReader interface {
	ReadKey(ctx context.Context, key []byte) ([]byte, error)
}

// ReadKey returns the value of key, or ErrNotFound, as a View with one Get would.
func ReadKey(ctx context.Context, s Store, key []byte) ([]byte, error) {
	if r, ok := s.(KeyReader); ok {
		return r.ReadKey(ctx, key)
	}
	var v []byte
	err := s.View(ctx, func(txn Txn) error {
		var err error
		v, err = txn.Get(key)
		return err
	})
	return v, err
}
