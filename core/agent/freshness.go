package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

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
// store's removal generation (agent/gen); an instance re-reads it in the
// background once it is removalRefresh old, and answers from its caches only while
// its last read started less than RemovalMaxAge ago (else it reads it first, or
// fails). A new generation empties the caches; so does a removal made here, at
// once. A lookup that misses the caches reads the store, which is always current.
//
// Cost on the hot path (a known key's signature check): two atomic loads and a
// clock read; one small store read per second in the background while lookups
// come, none when idle.
type freshness struct {
	store storage.Store
	now   func() time.Time

	// epoch counts the emptyings of the caches. A lookup reads it before reading
	// the store and keeps what it read only if it is unchanged (put), so that an
	// answer read before a removal is not cached after the removal emptied the
	// caches.
	epoch atomic.Uint64
	// checked is when (unix nanoseconds) the last successful read of the
	// generation started; 0: never.
	checked    atomic.Int64
	refreshing atomic.Bool

	mu       sync.Mutex // guards gen and the fields below; one foreground read at a time
	gen      uint64
	seen     bool // gen was read once
	failedAt time.Time
	failed   error

	// empty empties the caches; set by the Service.
	empty func()
}

// usable reports whether the caches may be answered from now (nil), reading the
// removal generation first when the last read is RemovalMaxAge old; the error
// wraps storage.ErrUnavailable when it cannot be read.
func (f *freshness) usable(ctx context.Context) error {
	now := f.now()
	age := now.Sub(time.Unix(0, f.checked.Load()))
	switch {
	case age >= 0 && age < removalRefresh:
		return nil
	case age >= 0 && age < RemovalMaxAge:
		if f.refreshing.CompareAndSwap(false, true) {
			go func() {
				defer f.refreshing.Store(false)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				f.mu.Lock()
				defer f.mu.Unlock()
				_ = f.load(ctx) // on failure a lookup past the bound reads again
			}()
		}
		return nil
	}
	return f.refresh(ctx)
}

// refresh reads the generation in the foreground, unless another lookup just did,
// or just failed to (its error is then answered for removalRetry).
func (f *freshness) refresh(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if age := now.Sub(time.Unix(0, f.checked.Load())); age >= 0 && age < RemovalMaxAge {
		return nil // read by the lookup we waited for
	}
	if f.failed != nil && now.Sub(f.failedAt) < removalRetry && !now.Before(f.failedAt) {
		return f.failed
	}
	if err := f.load(ctx); err != nil {
		err = fmt.Errorf("%w: the agent removal generation cannot be read: %w", storage.ErrUnavailable, err)
		if ctx.Err() == nil {
			f.failed, f.failedAt = err, now
		}
		return err
	}
	f.failed = nil
	return nil
}

// load reads the generation and empties the caches when it changed. The caller
// holds mu.
func (f *freshness) load(ctx context.Context) error {
	started := f.now()
	var gen uint64
	switch b, err := storage.ReadKey(ctx, f.store, removalGenKey()); {
	case err == nil && len(b) == 8:
		gen = binary.BigEndian.Uint64(b)
	case err == nil, errors.Is(err, storage.ErrNotFound):
	default:
		return err
	}
	if !f.seen || gen != f.gen {
		f.gen, f.seen = gen, true
		f.emptyCaches()
	}
	if n := started.UnixNano(); n > f.checked.Load() {
		f.checked.Store(n)
	}
	return nil
}

// stamp returns the epoch a lookup that is about to read the store keeps its
// answer under (put). Before the generation was ever read it reads it first, so
// that the caches are not emptied by that first read (whose generation is new to
// this instance) right after they were filled; a failure leaves that to a later
// read.
func (f *freshness) stamp(ctx context.Context) uint64 {
	if f.checked.Load() == 0 {
		_ = f.refresh(ctx)
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
