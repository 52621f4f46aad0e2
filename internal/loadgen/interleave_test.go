package loadgen

import (
	"sync/atomic"
	"testing"
	"time"
)

// counting is a side of one worker whose operation takes about a millisecond
// and counts itself in n; with pool > 0 it runs out after pool operations. Its
// slices' first operations are appended to order.
func counting(name string, n *atomic.Int64, pool int64, order *[]string) Side {
	first := false
	return Side{Name: name, BeforeSlice: func() { first = true }, Ops: []Op{func(bool) error {
		if pool > 0 && n.Load() >= pool {
			return ErrPoolDone
		}
		if first {
			*order = append(*order, name)
			first = false
		}
		time.Sleep(time.Millisecond)
		n.Add(1)
		return nil
	}}}
}

// TestInterleave: each side is measured in as many slices as the total asks
// (one warm-up slice of each not counted), in turns rotated each time, its
// operations and time summed; a pool that runs out ends the measurement after
// that turn, flagged.
func TestInterleave(t *testing.T) {
	var na, nb, nc atomic.Int64
	var order []string
	slice := 20 * time.Millisecond
	rs, err := Interleave([]Side{counting("a", &na, 0, &order), counting("b", &nb, 0, &order), counting("c", &nc, 0, &order)}, slice, 60*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Slices != 3 || r.Elapsed < 3*slice || r.PoolExhaustedAt != 0 {
			t.Errorf("want 3 slices of at least %s in all, no pool run out: %+v", slice, r)
		}
	}
	if rs[0].Ops == 0 || int64(rs[0].Ops) >= na.Load() || int64(rs[2].Ops) >= nc.Load() {
		t.Errorf("the warm-up slices must run but not count: measured %d and %d of %d and %d", rs[0].Ops, rs[2].Ops, na.Load(), nc.Load())
	}
	if got, want := fmt3(order), "abc abc bca cab"; got != want {
		t.Errorf("slices ran in the order %q, want %q (the warm-up, then turns rotated)", got, want)
	}

	na.Store(0)
	nb.Store(0)
	order = nil
	rs, err = Interleave([]Side{counting("a", &na, 30, &order), counting("b", &nb, 0, &order)}, slice, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].PoolExhaustedAt == 0 || rs[0].Slices >= 50 || rs[1].Slices != rs[0].Slices {
		t.Errorf("a's pool of 30 must end the measurement early, after the same turns for both: %+v, %+v", rs[0], rs[1])
	}
}

// TestSliceShare: an operation that reports its slice's share used ends that
// slice without running out the pool.
func TestSliceShare(t *testing.T) {
	var next, limit atomic.Int64
	side := Side{Name: "shared", BeforeSlice: func() { limit.Store(next.Load() + 5) }, Ops: []Op{func(bool) error {
		if next.Load() >= limit.Load() {
			return ErrSliceDone
		}
		next.Add(1)
		return nil
	}}}
	rs, err := Interleave([]Side{side}, time.Second, 4*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r := rs[0]; r.Ops != 20 || r.Slices != 4 || r.PoolExhaustedAt != 0 || r.Elapsed >= time.Second {
		t.Errorf("want 4 slices of 5 operations each, ended by their shares long before a second, none run out: %+v", r)
	}
}

// fmt3 groups order in threes.
func fmt3(order []string) string {
	s := ""
	for i, o := range order {
		if i > 0 && i%3 == 0 {
			s += " "
		}
		s += o
	}
	return s
}
