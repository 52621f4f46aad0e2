package storage

import (
	"bytes"
	"slices"
	"sync"
	"sync/atomic"
)

// Watcher is implemented by a Store that every write passes through: one this
// process holds open alone (Badger locks its directory to one process, and
// Caddy's config generations share one Store; memstore lives in memory). Such a
// store can tell when keys under a prefix change, and a cache of keys it does not
// hold can then be exact (Changes). A store that other processes write too
// (PostgreSQL) is not a Watcher.
type Watcher interface {
	// Watch returns the counter of the commits that set or delete a key starting
	// with prefix. A prefix watched again gets the same counter. A write made
	// before the prefix was first watched is not counted, even if it commits
	// later: watch a prefix before anything writes under it.
	Watch(prefix []byte) *Changes
}

// Changes counts the commits that wrote under one watched prefix. A commit is
// counted after it is visible to reads begun later, so a key that a read found
// absent, with Count n before the read began, is still absent while Count is n:
// a write the read began too early to see was counted after the read began.
// Records expiring are not counted: expiry only makes keys absent.
type Changes struct{ n atomic.Uint64 }

// Count is the number of commits counted so far.
func (c *Changes) Count() uint64 { return c.n.Load() }

// Watches are the watched prefixes of a Store that implements Watcher, for its
// Watch; the zero value watches nothing.
type Watches struct {
	mu   sync.Mutex              // serializes Watch
	list atomic.Pointer[[]watch] // read by every Set and Delete, replaced by Watch
}

type watch struct {
	prefix  []byte
	changes *Changes
}

// Watch returns prefix's counter, watching prefix from now on if it was not.
func (w *Watches) Watch(prefix []byte) *Changes {
	w.mu.Lock()
	defer w.mu.Unlock()
	var list []watch
	if p := w.list.Load(); p != nil {
		list = *p
	}
	for _, x := range list {
		if bytes.Equal(x.prefix, prefix) {
			return x.changes
		}
	}
	c := &Changes{}
	list = append(list[:len(list):len(list)], watch{prefix: bytes.Clone(prefix), changes: c})
	w.list.Store(&list)
	return c
}

// Note adds to t the counters of the prefixes key starts with, each once: a
// Txn's Set and Delete call it, and its store calls t.Committed once the
// transaction has committed and is visible to new reads.
func (w *Watches) Note(t *Touched, key []byte) {
	p := w.list.Load()
	if p == nil {
		return
	}
	for _, x := range *p {
		if bytes.HasPrefix(key, x.prefix) && !slices.Contains(*t, x.changes) {
			*t = append(*t, x.changes)
		}
	}
}

// ChangedAll counts a change of every watched prefix: for a write that does not
// go through a Txn (an import), once it is visible.
func (w *Watches) ChangedAll() {
	if p := w.list.Load(); p != nil {
		for _, x := range *p {
			x.changes.n.Add(1)
		}
	}
}

// Touched are the counters a transaction's writes matched (Watches.Note).
type Touched []*Changes

// Committed counts the commit once in every counter touched.
func (t Touched) Committed() {
	for _, c := range t {
		c.n.Add(1)
	}
}
