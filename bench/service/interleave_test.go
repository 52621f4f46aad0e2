package service

import (
	"flag"
	"fmt"
	"time"

	"github.com/palmgate/palmgate/internal/loadgen"
)

var loadSlice = flag.Duration("load.slice", 500*time.Millisecond, "slice length of the interleaved measurements (a scenario and its baseline in alternating slices)")

// interleavedPairs are the ratio goals whose baseline is work in this process:
// each scenario and its baseline are also measured interleaved, once a round,
// when both run. The first pair decides goal 3's ratio.
var interleavedPairs = [][2]string{{"exchange-rs", "signs-rs"}, {"exchange", "signs"}}

// interleavedName is the key of a scenario's interleaved results.
func interleavedName(name string) string { return name + " (interleaved)" }

// interleave measures scenario a and its baseline b in alternating slices
// (loadgen.Interleave: a b, b a, a b, ..., after one warm-up slice of each),
// until each has been measured for total, so that their ratio no longer
// measures how the machine's speed drifts between two separate slots. Each
// side's result sums its slices (pairs counts them); a pool that runs out ends
// the measurement after the pair it ran out in.
func interleave(a, b scenario, pids map[string]int, slice, total time.Duration) (ra, rb result, err error) {
	var sides []loadgen.Side
	for _, sc := range []scenario{a, b} {
		ops := make([]loadgen.Op, sc.workers)
		for w := range ops {
			op, done, err := sc.setup(w)
			if err != nil {
				return result{}, result{}, fmt.Errorf("%s: %w", sc.name, err)
			}
			defer done()
			ops[w] = func(bool) error { return op() }
		}
		sides = append(sides, loadgen.Side{Name: sc.name, Ops: ops, PID: pids[sc.server]})
	}
	rs, err := loadgen.Interleave(sides, slice, total)
	if err != nil {
		return result{}, result{}, err
	}
	out := func(r loadgen.Interleaved) result {
		return result{Result: r.Result, otherCores: r.OtherCores, pairs: r.Slices}
	}
	return out(rs[0]), out(rs[1]), nil
}
