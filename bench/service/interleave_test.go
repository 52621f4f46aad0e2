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

// interleave measures scenario a and its baseline b in alternating slices of
// length slice (a b, b a, a b, ...: neither always goes first), after one
// warm-up slice of each, until each has been measured for total. Both see the
// same machine, so their ratio no longer measures how its speed drifts between
// two separate slots. Each side's result sums its slices' operations, time and
// CPU (the server's and this process's, as runScenario samples them); its
// pairs counts the slice pairs. A pool that runs out ends the measurement after
// the pair it ran out in.
func interleave(a, b scenario, pids map[string]int, slice, total time.Duration) (ra, rb result, err error) {
	type side struct {
		sc    scenario
		ops   []loadgen.Op
		sum   result
		other float64 // other processes' cores x seconds
	}
	sides := []*side{{sc: a}, {sc: b}}
	for _, sd := range sides {
		sd.ops = make([]loadgen.Op, sd.sc.workers)
		for w := range sd.ops {
			op, done, err := sd.sc.setup(w)
			if err != nil {
				return result{}, result{}, fmt.Errorf("%s: %w", sd.sc.name, err)
			}
			defer done()
			sd.ops[w] = func(bool) error { return op() }
		}
	}
	run := func(sd *side) (loadgen.Result, error) {
		res, err := loadgen.Run(sd.ops, loadgen.Options{Duration: slice, PID: pids[sd.sc.server]})
		if err != nil {
			err = fmt.Errorf("%s: %w", sd.sc.name, err)
		}
		return res, err
	}
	for _, sd := range sides { // the warm-up
		if _, err := run(sd); err != nil {
			return result{}, result{}, err
		}
	}
	pairs := max(1, int((total+slice-1)/slice))
	for i := range pairs {
		order := sides
		if i%2 == 1 {
			order = []*side{sides[1], sides[0]}
		}
		ranOut := false
		for _, sd := range order {
			res, err := run(sd)
			if err != nil {
				return result{}, result{}, err
			}
			s := &sd.sum
			if res.PoolExhaustedAt > 0 && s.PoolExhaustedAt == 0 {
				s.PoolExhaustedAt = s.Elapsed + res.PoolExhaustedAt
				ranOut = true
			}
			s.Ops += res.Ops
			s.Elapsed += res.Elapsed
			s.ProcessCPU += res.ProcessCPU
			s.SelfCPU += res.SelfCPU
			sd.other += res.OtherCores(res.ProcessCPU+res.SelfCPU, res.After.At.Sub(res.Before.At)) * res.Elapsed.Seconds()
			s.pairs++
		}
		if ranOut {
			break
		}
	}
	for _, sd := range sides {
		sd.sum.otherCores = sd.other / sd.sum.Elapsed.Seconds()
	}
	return sides[0].sum, sides[1].sum, nil
}
