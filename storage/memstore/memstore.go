// Package memstore is storage.Store in memory, for tests of the domain that need
// neither a disk nor a database. Updates run one at a time (so they never
// conflict) and Views see the state of the last committed Update. It passes the
// storagetest conformance suite, durability across a reopen aside: nothing
// survives the process.
package memstore

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/palmgate/palmgate/storage"
)

// ErrReadOnly is returned by Set and Delete in a View.
var ErrReadOnly = errors.New("memstore: write in a read-only transaction")

// ErrClosed is returned by Update and View after Close.
var ErrClosed = errors.New("memstore: store is closed")

type entry struct {
	value   []byte
	expires time.Time // zero: never
}

// Store is an in-memory storage.Store. Its TTLs follow the real clock, as the
// other stores' do.
type Store struct {
	mu      sync.RWMutex
	data    map[string]entry
	closed  bool
	watches storage.Watches // prefixes whose commits are counted (Watch)
}

var _ storage.Watcher = (*Store)(nil)

// Watch returns the counter of the commits that write under prefix.
func (s *Store) Watch(prefix []byte) *storage.Changes { return s.watches.Watch(prefix) }

// New returns an empty store.
func New() *Store { return &Store{data: map[string]entry{}} }

// Update runs fn with the store to itself and commits its writes when it
// returns nil.
func (s *Store) Update(ctx context.Context, fn func(storage.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	t := &txn{s: s, now: time.Now(), writes: map[string]*entry{}}
	if err := fn(t); err != nil {
		return err
	}
	var touched storage.Touched
	for k, e := range t.writes {
		if e == nil {
			delete(s.data, k)
		} else {
			s.data[k] = *e
		}
		s.watches.Note(&touched, []byte(k))
	}
	touched.Committed() // before the lock is released: a View begun later sees the writes
	return nil
}

// View runs fn over the committed state.
func (s *Store) View(ctx context.Context, fn func(storage.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return fn(&txn{s: s, now: time.Now(), readOnly: true})
}

// Close empties the store; later calls fail with ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed, s.data = true, nil
	return nil
}

// txn reads the store through its own writes (nil: deleted).
type txn struct {
	s        *Store
	now      time.Time
	readOnly bool
	writes   map[string]*entry
}

func (t *txn) lookup(key string) (entry, bool) {
	if e, ok := t.writes[key]; ok {
		if e == nil {
			return entry{}, false
		}
		return *e, true
	}
	e, ok := t.s.data[key]
	if !ok || (!e.expires.IsZero() && !t.now.Before(e.expires)) {
		return entry{}, false
	}
	return e, true
}

func (t *txn) Get(key []byte) ([]byte, error) {
	e, ok := t.lookup(string(key))
	if !ok {
		return nil, storage.ErrNotFound
	}
	return bytes.Clone(e.value), nil
}

func (t *txn) Set(key, value []byte, ttl time.Duration) error {
	if t.readOnly {
		return ErrReadOnly
	}
	e := &entry{value: bytes.Clone(value)}
	if ttl > 0 {
		e.expires = t.now.Add(ttl)
	}
	t.writes[string(key)] = e
	return nil
}

func (t *txn) Delete(key []byte) error {
	if t.readOnly {
		return ErrReadOnly
	}
	t.writes[string(key)] = nil
	return nil
}

// keys returns the live keys under prefix, in byte order.
func (t *txn) keys(prefix string) []string {
	var ks []string
	for k := range t.s.data {
		if strings.HasPrefix(k, prefix) {
			if _, written := t.writes[k]; !written {
				ks = append(ks, k)
			}
		}
	}
	for k := range t.writes {
		if strings.HasPrefix(k, prefix) {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks
}

func (t *txn) Iterate(prefix []byte, fn func(key, value []byte) (bool, error)) error {
	for _, k := range t.keys(string(prefix)) {
		e, ok := t.lookup(k)
		if !ok {
			continue
		}
		if more, err := fn([]byte(k), bytes.Clone(e.value)); err != nil || !more {
			return err
		}
	}
	return nil
}

func (t *txn) IterateKeys(prefix []byte, fn func(key []byte) (bool, error)) error {
	return t.Iterate(prefix, func(k, _ []byte) (bool, error) { return fn(k) })
}

var _ storage.Store = (*Store)(nil)
