package loadgen

import (
	"errors"
	"fmt"
	"time"
)

// Side is one scenario of an interleaved measurement.
type Side struct {
	// Name names the side in errors.
	Name string
	// Ops are its workers' operations, as for Run.
	Ops []Op
	// PID is its server process (0 for none), as Options.PID.
	PID int
	// BeforeSlice, if set, runs before each of its slices (the warm-up's too):
	// it hands a slice its share of a pool, say, whose end the side's
	// operations then report with ErrSliceDone.
	BeforeSlice func()
}

// Interleaved is one side's measurement: the sums of its slices.
type Interleaved struct {
	// Result sums the slices' operations, time and CPU; P50 and P99 are the
	// medians of the slices' percentiles; PoolExhaustedAt counts in the
	// summed time.
	Result
	// Slices is the number of measured slices.
	Slices int
	// OtherCores is the CPU other processes used meanwhile, in cores.
	OtherCores float64
}

// Interleave measures sides in turns of one slice each, rotated every turn (a
// b c, b c a, c a b, ...: none always goes first), after one warm-up slice of
// each, until each has been measured for total. The sides then see the same
// machine: on a machine whose speed drifts between separate slots of a few
// seconds, the ratio of their rates measures their costs, not the drift. A pool
// that runs out (ErrPoolDone) ends the measurement after that turn.
func Interleave(sides []Side, slice, total time.Duration) ([]Interleaved, error) {
	if len(sides) == 0 || slice <= 0 {
		return nil, errors.New("interleave: no side or no slice")
	}
	run := func(s Side) (Result, error) {
		if s.BeforeSlice != nil {
			s.BeforeSlice()
		}
		res, err := Run(s.Ops, Options{Duration: slice, PID: s.PID})
		if err != nil {
			err = fmt.Errorf("%s: %w", s.Name, err)
		}
		return res, err
	}
	for _, s := range sides { // the warm-up
		if _, err := run(s); err != nil {
			return nil, err
		}
	}
	out := make([]Interleaved, len(sides))
	other := make([]float64, len(sides)) // cores x seconds
	p50s, p99s := make([][]time.Duration, len(sides)), make([][]time.Duration, len(sides))
	turns := max(1, int((total+slice-1)/slice))
	for turn := range turns {
		ranOut := false
		for k := range sides {
			i := (turn + k) % len(sides)
			res, err := run(sides[i])
			if err != nil {
				return nil, err
			}
			s := &out[i]
			if res.PoolExhaustedAt > 0 && s.PoolExhaustedAt == 0 {
				s.PoolExhaustedAt = s.Elapsed + res.PoolExhaustedAt
				ranOut = true
			}
			s.Ops += res.Ops
			s.Elapsed += res.Elapsed
			s.ProcessCPU += res.ProcessCPU
			s.SelfCPU += res.SelfCPU
			s.Slices++
			other[i] += res.OtherCores(res.ProcessCPU+res.SelfCPU, res.After.At.Sub(res.Before.At)) * res.Elapsed.Seconds()
			p50s[i], p99s[i] = append(p50s[i], res.P50), append(p99s[i], res.P99)
		}
		if ranOut {
			break
		}
	}
	for i := range out {
		out[i].OtherCores = other[i] / out[i].Elapsed.Seconds()
		out[i].P50 = MedianDuration(p50s[i], func(d time.Duration) time.Duration { return d })
		out[i].P99 = MedianDuration(p99s[i], func(d time.Duration) time.Duration { return d })
	}
	return out, nil
}
