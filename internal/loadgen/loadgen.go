// Package loadgen is the load generator of the benchmarks (bench,
// bench/service): raw HTTP/1.1 keep-alive connections that cost the machine
// little per request (Conn), a measured run of workers after a warm-up with
// latency percentiles (Run), the CPU time of the server, of this process and of
// the rest of the machine around it (SampleCPU), and the medians and rotated
// rounds of the reports. The scenarios, flags and reports stay with each
// benchmark package.
package loadgen

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Op is one operation of a worker: one request, say. warm is true during the
// warm-up. It returns ErrPoolDone when a pool of single-use requests has run
// out; the worker then stops without an error.
type Op func(warm bool) error

// ErrPoolDone is returned by an Op whose pool of prepared operations has run out.
var ErrPoolDone = errors.New("pool exhausted")

// ErrSliceDone is returned by an Op whose share of a pool for this run (a slice
// of an Interleave) is used up; the worker stops, and nothing runs out.
var ErrSliceDone = errors.New("slice's share used")

// Options are the timing and the accounting of a Run.
type Options struct {
	// Warmup is run before the measured part, by the same workers.
	Warmup time.Duration
	// Duration bounds the measured part (a pool may run out first).
	Duration time.Duration
	// PID is the server process whose CPU time is measured (0 for none).
	PID int
	// Profile, if set, runs beside the workers from the start of the measured
	// part (it fetches a CPU profile, say); its error fails the Run.
	Profile func() error
}

// Result is one measured run.
type Result struct {
	// Ops is the number of operations that started in the measured part.
	Ops int
	// Elapsed runs from the start of the measured part to the end of its last
	// operation.
	Elapsed time.Duration
	// P50 and P99 are latency percentiles of the measured operations.
	P50, P99 time.Duration
	// ProcessCPU is the CPU time of Options.PID in the measured part.
	ProcessCPU time.Duration
	// SelfCPU is the CPU time of this process (the load generator and
	// anything else it runs) in the measured part.
	SelfCPU time.Duration
	// Before and After are the CPU samples around the measured part.
	Before, After CPUSample
	// PoolExhaustedAt is when, from the start of the measured part, the first
	// worker found its pool empty (0 if none did).
	PoolExhaustedAt time.Duration
}

// Rate is operations per second of the measured part.
func (r Result) Rate() float64 { return float64(r.Ops) / r.Elapsed.Seconds() }

// OtherCores estimates the cores other processes kept busy in the measured
// part: the machine's busy cores between the CPU samples, less the CPU time
// ours (typically ProcessCPU+SelfCPU) spread over the interval over.
func (r Result) OtherCores(ours, over time.Duration) float64 {
	if r.After.Total-r.Before.Total <= 0 {
		return 0
	}
	return max(0, r.Before.busyCores(r.After)-ours.Seconds()/over.Seconds())
}

// Run runs ops, one worker each, through the warm-up and then the measured
// part, and samples CPU times at the start and the end of the measured part.
// An Op's error (other than ErrPoolDone and ErrSliceDone) stops its worker and fails the Run.
func Run(ops []Op, o Options) (Result, error) {
	n := len(ops)
	measureFrom := time.Now().Add(o.Warmup)
	end := measureFrom.Add(o.Duration)

	var before CPUSample
	var profErr error
	var side sync.WaitGroup
	side.Go(func() {
		time.Sleep(time.Until(measureFrom))
		before = SampleCPU(o.PID)
	})
	if o.Profile != nil {
		side.Go(func() {
			time.Sleep(time.Until(measureFrom))
			profErr = o.Profile()
		})
	}

	lat := make([][]time.Duration, n)
	lastDone := make([]time.Time, n)
	errs := make([]error, n)
	var exhaustedAt atomic.Int64
	var wg sync.WaitGroup
	for w, op := range ops {
		lat[w] = make([]time.Duration, 0, 4096)
		wg.Go(func() {
			for {
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				measuring := !t0.Before(measureFrom)
				err := op(!measuring)
				if errors.Is(err, ErrPoolDone) {
					exhaustedAt.CompareAndSwap(0, int64(t0.Sub(measureFrom)))
					return
				}
				if errors.Is(err, ErrSliceDone) {
					return
				}
				if err != nil {
					errs[w] = err
					return
				}
				if measuring {
					done := time.Now()
					lat[w] = append(lat[w], done.Sub(t0))
					lastDone[w] = done
				}
			}
		})
	}
	wg.Wait()
	after := SampleCPU(o.PID)
	side.Wait()
	if err := errors.Join(errs...); err != nil {
		return Result{}, err
	}
	if profErr != nil {
		return Result{}, fmt.Errorf("profile: %w", profErr)
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	if len(all) == 0 {
		return Result{}, errors.New("no operation in the measured time (a pool ran out in the warm-up?)")
	}
	slices.Sort(all)
	last := slices.MaxFunc(lastDone, func(a, b time.Time) int { return a.Compare(b) })
	return Result{
		Ops: len(all), Elapsed: last.Sub(measureFrom),
		P50: all[len(all)/2], P99: all[len(all)*99/100],
		ProcessCPU: after.Process - before.Process, SelfCPU: after.Self - before.Self,
		Before: before, After: after,
		PoolExhaustedAt: time.Duration(exhaustedAt.Load()),
	}, nil
}

// Rotate returns a copy of s that starts at element r (modulo its length): the
// order of round r, so that every scenario takes every place in turn.
func Rotate[T any](s []T, r int) []T {
	r %= len(s)
	return append(slices.Clone(s[r:]), s[:r]...)
}

// Median is the median of v (0 for none); v is left as it was.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// MedianOf is the median of f over xs.
func MedianOf[T any](xs []T, f func(T) float64) float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	return Median(v)
}

// MedianDuration is the median of f over xs, rounded to the microsecond.
func MedianDuration[T any](xs []T, f func(T) time.Duration) time.Duration {
	return time.Duration(MedianOf(xs, func(x T) float64 { return float64(f(x)) })).Round(time.Microsecond)
}

// RatioText is x to two decimals, or to three when two would round it across
// want (0.795 against 0.80 is not shown as 0.80 beside a MISS).
func RatioText(x, want float64) string {
	s := fmt.Sprintf("%.2f", x)
	if r, err := strconv.ParseFloat(s, 64); err == nil && (r < want) != (x < want) {
		return fmt.Sprintf("%.3f", x)
	}
	return s
}
