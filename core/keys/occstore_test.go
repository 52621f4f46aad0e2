package keys

import (
	"bytes"
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/palmgate/palmgate/storage"
)

// occStore is a storage.Store whose Updates run concurrently, each over a snapshot,
// and commit optimistically: an Update that read a key (or iterated a prefix) which
// another committed after its snapshot is run again, as serializable backends do
// for transactions of separate instances. palmgate's own stores serialize the
// Updates of one process (Badger's group commit, memstore's lock), so only a store
// like this one lets one test overlap two instances' transactions. TTLs are
// ignored (the keys package sets none).
type occStore struct {
	mu      sync.Mutex
	version uint64
	data    map[string][]byte
	changed map[string]uint64 // key -> version of its last write or delete
}

func newOCCStore() *occStore {
	return &occStore{data: map[string][]byte{}, changed: map[string]uint64{}}
}

type occTxn struct {
	snap     map[string][]byte
	readOnly bool
	writes   map[string][]byte // nil value: deleted
	reads    []string          // keys read
	prefixes []string          // prefixes iterated
}

func (s *occStore) snapshot() (map[string][]byte, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := make(map[string][]byte, len(s.data))
	for k, v := range s.data {
		snap[k] = v
	}
	return snap, s.version
}

func (s *occStore) Update(ctx context.Context, fn func(storage.Txn) error) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		snap, start := s.snapshot()
		t := &occTxn{snap: snap, writes: map[string][]byte{}}
		if err := fn(t); err != nil {
			return err
		}
		if s.commit(t, start) {
			return nil
		}
	}
}

// commit applies t's writes unless something t read changed after start.
func (s *occStore) commit(t *occTxn, start uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.changed {
		if v <= start {
			continue
		}
		for _, r := range t.reads {
			if k == r {
				return false
			}
		}
		for _, p := range t.prefixes {
			if strings.HasPrefix(k, p) {
				return false
			}
		}
	}
	s.version++
	for k, v := range t.writes {
		if v == nil {
			delete(s.data, k)
		} else {
			s.data[k] = v
		}
		s.changed[k] = s.version
	}
	return true
}

func (s *occStore) View(ctx context.Context, fn func(storage.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	snap, _ := s.snapshot()
	return fn(&occTxn{snap: snap, readOnly: true})
}

func (s *occStore) Close() error { return nil }

var errOCCReadOnly = errors.New("occStore: write in a View")

func (t *occTxn) lookup(k string) ([]byte, bool) {
	if v, ok := t.writes[k]; ok {
		return v, v != nil
	}
	v, ok := t.snap[k]
	return v, ok
}

func (t *occTxn) Get(key []byte) ([]byte, error) {
	t.reads = append(t.reads, string(key))
	v, ok := t.lookup(string(key))
	if !ok {
		return nil, storage.ErrNotFound
	}
	return bytes.Clone(v), nil
}

func (t *occTxn) Set(key, value []byte, _ time.Duration) error {
	if t.readOnly {
		return errOCCReadOnly
	}
	t.writes[string(key)] = bytes.Clone(value)
	return nil
}

func (t *occTxn) Delete(key []byte) error {
	if t.readOnly {
		return errOCCReadOnly
	}
	t.writes[string(key)] = nil
	return nil
}

func (t *occTxn) Iterate(prefix []byte, fn func(key, value []byte) (bool, error)) error {
	p := string(prefix)
	t.prefixes = append(t.prefixes, p)
	seen := map[string]bool{}
	var ks []string
	for _, m := range []map[string][]byte{t.snap, t.writes} {
		for k := range m {
			if strings.HasPrefix(k, p) && !seen[k] {
				seen[k] = true
				ks = append(ks, k)
			}
		}
	}
	sort.Strings(ks)
	for _, k := range ks {
		v, ok := t.lookup(k)
		if !ok {
			continue
		}
		more, err := fn([]byte(k), bytes.Clone(v))
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func (t *occTxn) IterateKeys(prefix []byte, fn func(key []byte) (bool, error)) error {
	return t.Iterate(prefix, func(k, _ []byte) (bool, error) { return fn(k) })
}
