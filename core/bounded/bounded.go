// Package bounded holds a value read from the store and answered from memory with
// a bound on its age: the revocation set (core/oidc) and the agent removal
// generation (core/agent) are two such values. It knows no domain and no database:
// the value comes from a load function.
package bounded

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// backgroundTimeout bounds a background read, which has no caller's context.
const backgroundTimeout = 5 * time.Second

// Config is what a Value is built from.
type Config[T any] struct {
	// Load reads the value from the store. Its error is answered to the callers
	// that wait on the read (wrap storage.ErrUnavailable into it when the edge is to
	// answer 503). Reads are made one at a time.
	Load func(ctx context.Context) (T, error)
	// Merge, when set, returns the value to hold after a read: held is the value
	// held until then (with the own changes made while the read was under way; the
	// zero T before the first read), loaded what the read returned. Nil: loaded.
	// It runs under the Value's lock and may have side effects (empty a cache).
	Merge func(held, loaded T) T
	// Now is the clock.
	Now func() time.Time
	// Refresh is the age at which the value is read again in the background.
	Refresh time.Duration
	// MaxAge bounds the age of an answer: past it, Get reads the value first.
	MaxAge time.Duration
	// Retry is how long a failed foreground read is answered to the callers that
	// wait on it before the store is tried again, so that an outage costs one read
	// per Retry, not one per request.
	Retry time.Duration
}

// Value is a value read from the store and kept in memory. Get answers it while
// its last read started less than Refresh ago; from Refresh to MaxAge it answers
// it and reads it again in the background; past MaxAge (or when the clock went
// back) it reads it first, one read at a time for all callers, and a failed read is
// answered for Retry. Update applies this instance's own changes at once. So a
// change made by another instance sharing the store is seen within MaxAge.
//
// Cost of a Get within Refresh: a clock read and an atomic load.
type Value[T any] struct {
	cfg Config[T]

	cur        atomic.Pointer[snapshot[T]] // nil: never read nor updated
	refreshing atomic.Bool                 // a background read is under way

	mu sync.Mutex // orders installing a read against Update

	loadMu   sync.Mutex // one read at a time; guards the fields below
	failedAt time.Time  // of the last failed foreground read
	failed   error
}

// snapshot is a value and when the read it comes from started (zero: never read).
type snapshot[T any] struct {
	val     T
	started time.Time
}

// New returns a Value that has not read anything yet: the first Get reads.
func New[T any](cfg Config[T]) *Value[T] { return &Value[T]{cfg: cfg} }

// Get returns the value, reading it first when its last read started MaxAge ago or
// more; the error is the failed read's.
func (v *Value[T]) Get(ctx context.Context) (T, error) {
	s := v.cur.Load()
	if s != nil {
		switch age := v.cfg.Now().Sub(s.started); {
		case age >= 0 && age < v.cfg.Refresh:
			return s.val, nil
		case age >= 0 && age < v.cfg.MaxAge:
			v.background()
			return s.val, nil
		}
	}
	return v.refresh(ctx)
}

// Read reports whether the value was read at least once.
func (v *Value[T]) Read() bool {
	s := v.cur.Load()
	return s != nil && !s.started.IsZero()
}

// Refreshing reports whether a background read is under way (tests wait for it to
// end before they count reads).
func (v *Value[T]) Refreshing() bool { return v.refreshing.Load() }

// Update applies an own change to the held value at once. change must return a
// new value and leave the one it is given unchanged: callers of Get may hold it.
func (v *Value[T]) Update(change func(T) T) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var s snapshot[T]
	if p := v.cur.Load(); p != nil {
		s = *p
	}
	s.val = change(s.val)
	v.cur.Store(&s)
}

// background starts a read unless one is under way.
func (v *Value[T]) background() {
	if !v.refreshing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer v.refreshing.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), backgroundTimeout)
		defer cancel()
		v.loadMu.Lock()
		defer v.loadMu.Unlock()
		if s := v.cur.Load(); s != nil {
			if age := v.cfg.Now().Sub(s.started); age >= 0 && age < v.cfg.Refresh {
				return // a foreground read just did
			}
		}
		_ = v.load(ctx) // on failure a Get past MaxAge reads again
	}()
}

// refresh reads the value in the foreground unless another caller just did, or just
// failed to (its error is then answered for Retry).
func (v *Value[T]) refresh(ctx context.Context) (T, error) {
	v.loadMu.Lock()
	defer v.loadMu.Unlock()
	now := v.cfg.Now()
	if s := v.cur.Load(); s != nil {
		if age := now.Sub(s.started); age >= 0 && age < v.cfg.MaxAge {
			return s.val, nil // read by the caller we waited for
		}
	}
	var zero T
	if v.failed != nil && now.Sub(v.failedAt) < v.cfg.Retry && !now.Before(v.failedAt) {
		return zero, v.failed
	}
	if err := v.load(ctx); err != nil {
		if ctx.Err() == nil { // not this caller's own cancellation: answer it to the others too
			v.failed, v.failedAt = err, now
		}
		return zero, err
	}
	v.failed = nil
	return v.cur.Load().val, nil
}

// load reads the value and installs it. The caller holds loadMu.
func (v *Value[T]) load(ctx context.Context) error {
	started := v.cfg.Now()
	loaded, err := v.cfg.Load(ctx)
	if err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.cfg.Merge != nil {
		var held T
		if p := v.cur.Load(); p != nil {
			held = p.val
		}
		loaded = v.cfg.Merge(held, loaded)
	}
	v.cur.Store(&snapshot[T]{val: loaded, started: started})
	return nil
}
