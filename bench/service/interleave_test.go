package service

import (
	"flag"
	"fmt"
	"time"

	"github.com/palmgate/palmgate/internal/loadgen"
)

var loadSlice = flag.Duration("load.slice", 500*time.Millisecond, "slice length of the interleaved measurements (a scenario and its baseline in alternating slices)")

// interleavedGroups are the ratio goals measured interleaved, once a round, by
// the scenarios of each group that run (at least two): the exchanges, their
// signatures (goal 3) and the minimal token handler in Caddy (3'), and
// verify/signature with its two baselines (goals 1' and 1”).
var interleavedGroups = [][]string{
	{"exchange-rs", "signs-rs", "token-caddy-rs"},
	{"exchange", "signs", "token-caddy"},
	{"verify-reg", "verify-unreg", "minimal-proc", "minimal-caddy"},
}

// interleavedRatios are the ratios (scenario, baseline) the report takes from
// interleaved results when both were measured.
var interleavedRatios = [][2]string{
	{"exchange-rs", "signs-rs"}, {"exchange", "signs"},
	{"exchange-rs", "token-caddy-rs"}, {"token-caddy-rs", "signs-rs"},
	{"exchange", "token-caddy"}, {"token-caddy", "signs"},
	{"verify-reg", "minimal-proc"}, {"verify-unreg", "minimal-proc"},
	{"verify-reg", "minimal-caddy"}, {"verify-unreg", "minimal-caddy"},
	{"minimal-caddy", "minimal-proc"},
}

// interleavedName is the key of a scenario's interleaved results.
func interleavedName(name string) string { return name + " (interleaved)" }

// interleave measures scenarios in turns of one slice each (loadgen.Interleave:
// a b, b a, a b, ... for two, after one warm-up slice of each), until each has
// been measured for total, so that their ratios no longer measure how the
// machine's speed drifts between separate slots. Each result sums its slices
// (turns counts them); a pool that runs out ends the measurement after the
// turn it ran out in.
func interleave(scenarios []scenario, pids map[string]int, slice, total time.Duration) ([]result, error) {
	var sides []loadgen.Side
	for _, sc := range scenarios {
		ops := make([]loadgen.Op, sc.workers)
		for w := range ops {
			op, done, err := sc.setup(w)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", sc.name, err)
			}
			defer done()
			ops[w] = func(bool) error { return op() }
		}
		sides = append(sides, loadgen.Side{Name: sc.name, Ops: ops, PID: pids[sc.server]})
	}
	rs, err := loadgen.Interleave(sides, slice, total)
	if err != nil {
		return nil, err
	}
	out := make([]result, len(rs))
	for i, r := range rs {
		out[i] = result{Result: r.Result, otherCores: r.OtherCores, turns: r.Slices}
	}
	return out, nil
}
