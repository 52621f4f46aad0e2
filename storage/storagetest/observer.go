package storagetest

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/palmgate/palmgate/storage"
)

// Recorder is a storage.Observer that remembers what it was told, for tests of
// the backends' measurements.
type Recorder struct {
	mu        sync.Mutex
	ops       map[storage.Op][]time.Duration
	retries   int
	groups    []int
	fallbacks map[storage.Fallback]int
}

var _ storage.Observer = (*Recorder)(nil)

// Operation records op's duration.
func (r *Recorder) Operation(op storage.Op, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ops == nil {
		r.ops = map[storage.Op][]time.Duration{}
	}
	r.ops[op] = append(r.ops[op], d)
}

// ConflictRetry counts a retry.
func (r *Recorder) ConflictRetry() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.retries++
}

// Group records a group's size.
func (r *Recorder) Group(size int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.groups = append(r.groups, size)
}

// GroupFallback counts a member that left its group.
func (r *Recorder) GroupFallback(reason storage.Fallback) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fallbacks == nil {
		r.fallbacks = map[storage.Fallback]int{}
	}
	r.fallbacks[reason]++
}

// Ops returns the durations recorded for op, oldest first.
func (r *Recorder) Ops(op storage.Op) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops[op])
}

// Retries returns the conflict retries counted.
func (r *Recorder) Retries() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.retries
}

// Groups returns the group sizes recorded, oldest first.
func (r *Recorder) Groups() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.groups)
}

// Fallbacks returns the members counted as leaving their group, by reason.
func (r *Recorder) Fallbacks() map[storage.Fallback]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.fallbacks)
}

// Reset forgets everything recorded.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops, r.retries, r.groups, r.fallbacks = nil, 0, nil, nil
}
