package palm

import (
	"fmt"
	"sync"
	"time"

	"github.com/palmgate/palmgate/core/fault"
)

// BusyError refuses a new challenge while its purpose is at its cap of unfinished
// challenges; the edge answers 503 with Retry-After.
type BusyError struct {
	Purpose    Purpose
	RetryAfter time.Duration
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("too many unfinished %s requests; retry later", e.Purpose)
}

// CodeTooManyPending is the wire code of a BusyError.
const CodeTooManyPending = "too_many_pending_requests"

// Fault is the error's fault in core's model: unavailable for now.
func (e *BusyError) Fault() *fault.Error {
	return &fault.Error{Class: fault.Unavailable, Code: CodeTooManyPending, Message: e.Error()}
}

// pendingBucket is the width of the time slots the pending counter keeps.
const pendingBucket = 10 * time.Second

// pendingCaps bounds, per purpose, how many challenges this instance created within
// the time their records can live unfinished (the request's lifetime plus Grace).
// Every such record may still be on disk, so the cap bounds the disk a flood of
// unauthenticated requests can fill, whatever its sources. The count lives in this
// process: with several instances the bound is the sum of their caps, and a restart
// starts it afresh. It never makes one instance accept what another refused, since
// it only refuses.
type pendingCaps struct {
	mu     sync.Mutex
	limits map[Purpose]int
	counts map[Purpose]*window
}

// window counts events in time slots of pendingBucket, oldest first.
type window struct {
	slots []slot
	total int
}

type slot struct {
	start time.Time
	n     int
}

func newPendingCaps(limits map[Purpose]int) *pendingCaps {
	return &pendingCaps{limits: limits, counts: map[Purpose]*window{}}
}

// take counts a new challenge of purpose p at now whose record can live span, or
// returns a *BusyError when the cap is reached.
func (c *pendingCaps) take(p Purpose, now time.Time, span time.Duration) error {
	if c == nil || c.limits[p] <= 0 {
		return nil
	}
	limit := c.limits[p]
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.counts[p]
	if w == nil {
		w = &window{}
		c.counts[p] = w
	}
	cutoff := now.Add(-span)
	for len(w.slots) > 0 && !w.slots[0].start.Add(pendingBucket).After(cutoff) {
		w.total -= w.slots[0].n
		w.slots = w.slots[1:]
	}
	if w.total >= limit {
		retry := w.slots[0].start.Add(pendingBucket).Sub(cutoff)
		return &BusyError{Purpose: p, RetryAfter: max(retry, time.Second)}
	}
	start := now.Truncate(pendingBucket)
	if n := len(w.slots); n > 0 && w.slots[n-1].start.Equal(start) {
		w.slots[n-1].n++
	} else {
		w.slots = append(w.slots, slot{start: start, n: 1})
	}
	w.total++
	return nil
}
