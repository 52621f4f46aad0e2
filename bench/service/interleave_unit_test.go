package service

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/loadgen"
)

// counting is an in-process scenario whose operation takes about a
// millisecond and counts itself; with pool > 0 it runs out after pool
// operations.
func counting(name string, n *atomic.Int64, pool int64) scenario {
	return scenario{name: name, workers: 1, server: "self", setup: func(int) (func() error, func(), error) {
		return func() error {
			if pool > 0 && n.Load() >= pool {
				return loadgen.ErrPoolDone
			}
			time.Sleep(time.Millisecond)
			n.Add(1)
			return nil
		}, func() {}, nil
	}}
}

// TestInterleave: each side is measured in as many slices as the total asks
// (one warm-up slice of each not counted), its operations and time summed;
// a pool that runs out ends the measurement after that turn, flagged.
func TestInterleave(t *testing.T) {
	var na, nb atomic.Int64
	slice := 20 * time.Millisecond
	rs, err := interleave([]scenario{counting("a", &na, 0), counting("b", &nb, 0)}, nil, slice, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	ra, rb := rs[0], rs[1]
	for _, r := range []result{ra, rb} {
		if r.turns != 5 || r.Elapsed < 5*slice || r.PoolExhaustedAt != 0 {
			t.Errorf("want 5 slices of at least %s in all, no pool run out: %+v", slice, r)
		}
	}
	if ra.Ops == 0 || int64(ra.Ops) >= na.Load() || int64(rb.Ops) >= nb.Load() {
		t.Errorf("the warm-up slices must run but not count: measured %d and %d of %d and %d", ra.Ops, rb.Ops, na.Load(), nb.Load())
	}

	na.Store(0)
	nb.Store(0)
	rs, err = interleave([]scenario{counting("a", &na, 30), counting("b", &nb, 0)}, nil, slice, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ra, rb = rs[0], rs[1]
	if ra.PoolExhaustedAt == 0 || ra.turns >= 10 || rb.turns != ra.turns {
		t.Errorf("a's pool of 30 must end the measurement early, after the same turns for both: %+v, %+v", ra, rb)
	}
}
