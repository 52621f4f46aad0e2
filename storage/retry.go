package storage

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is the jittered exponential pause between attempts of a retried
// transaction (the stores' conflicts, lost connections): the ceiling doubles per
// attempt from Min up to Max, and the pause is drawn uniformly below it, which
// spreads out goroutines that all collide on the same hot key.
type Backoff struct{ Min, Max time.Duration }

// Before returns the pause before attempt+1 after attempt (1 or more) failed:
// at least Min/2, below Min/2 plus the ceiling.
func (b Backoff) Before(attempt int) time.Duration {
	ceiling := min(b.Min<<min(max(attempt, 1)-1, 16), b.Max)
	return b.Min/2 + rand.N(ceiling)
}

// Sleep pauses for d or until ctx is done, whichever comes first; it returns
// ctx's error if ctx ended first.
func Sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
