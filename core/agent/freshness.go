package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/palmgate/palmgate/core/bounded"
	"github.com/palmgate/palmgate/storage"
)

// removalRefresh is how often the removal generation is re-read from the store in
// the background while the caches are used.
const removalRefresh = time.Second

// RemovalMaxAge bounds how stale the registration caches may be: an agent removed
// by any instance sharing the store answers registered:false on every instance
// within this time. Past it, an answer from the caches waits for a read of the
// store's removal generation, and when the store cannot be read it fails (the
// edge answers 503 with Retry-After) rather than answer from an old cache.
const RemovalMaxAge = 2 * time.Second

// removalRetry is how long a failed foreground read of the generation is answered
// to the lookups that wait on it before the store is tried again.
const removalRetry = 250 * time.Millisecond

// freshness says whether the registration caches (registeredKeys,
// registeredAgents) may be answered from. A registration is no longer permanent:
// an agent can be removed, by any instance. Each removal counts one more in the
// store's removal generation (agent/gen); an instance holds it as a bounded.Value:
// re-read in the background once it is removalRefresh old, answered (the caches
// with it) only while its last read started less than RemovalMaxAge ago (else it
// is read first, or the lookup fails). A new generation empties the caches; so
// does a removal made here, at once. A lookup that misses the caches reads the
// store, which is always current.
//
// Cost on the hot path (a known key's signature check): two atomic loads and a
// clock read; one small store read per second in the background while lookups
// come, none when idle.
type freshness struct {
	store storage.Store
	gen   *bounded.Value[generation]

	// epoch counts the emptyings of the caches. A lookup reads it before reading
	// the store and keeps what it read only if it is unchanged (put), so that an
	// answer read before a removal is not cached after the removal emptied the
	// caches.
	epoch atomic.Uint64

	// empty empties the caches; set by the Service.
	empty func()
}

// generation is the store's removal generation as last read.
type generation struct {
	n    uint64
	read bool // false: never read (the zero value a first read replaces)
}

func newFreshness(store storage.Store, now func() time.Time, empty func()) *freshness {
	f := &freshness{store: store, empty: empty}
	f.gen = bounded.New(bounded.Config[generation]{
		Load: f.load, Merge: f.merge, Now: now,
		Refresh: removalRefresh, MaxAge: RemovalMaxAge, Retry: removalRetry,
	})
	return f
}

// usable reports whether the caches may be answered from now (nil), reading the
// removal generation first when the last read is RemovalMaxAge old; the error
// wraps storage.ErrUnavailable when it cannot be read.
func (f *freshness) usable(ctx context.Context) error {
	_, err := f.gen.Get(ctx)
	return err
}

// load reads the generation.
func (f *freshness) load(ctx context.Context) (generation, error) {
	switch b, err := storage.ReadKey(ctx, f.store, removalGenKey()); {
	case err == nil && len(b) == 8:
		return generation{n: binary.BigEndian.Uint64(b), read: true}, nil
	case err == nil, errors.Is(err, storage.ErrNotFound):
		return generation{read: true}, nil
	default:
		return generation{}, fmt.Errorf("%w: the agent removal generation cannot be read: %w", storage.ErrUnavailable, err)
	}
}

// merge empties the caches when the generation just read is new to this instance.
func (f *freshness) merge(held, loaded generation) generation {
	if held != loaded {
		f.emptyCaches()
	}
	return loaded
}

// stamp returns the epoch a lookup that is about to read the store keeps its
// answer under (put). Before the generation was ever read it reads it first, so
// that the caches are not emptied by that first read (whose generation is new to
// this instance) right after they were filled; a failure leaves that to a later
// read.
func (f *freshness) stamp(ctx context.Context) uint64 {
	if !f.gen.Read() {
		_ = f.usable(ctx)
	}
	return f.epoch.Load()
}

// removedHere empties the caches after a removal made by this instance committed.
func (f *freshness) removedHere() { f.emptyCaches() }

func (f *freshness) emptyCaches() {
	f.epoch.Add(1)
	if f.empty != nil {
		f.empty()
	}
}
