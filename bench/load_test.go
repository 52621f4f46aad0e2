package bench

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/loadgen"
)

// Flags of the load script (TestLoad); pass them after -args.
var (
	loadOn       = flag.Bool("load", false, "run TestLoad, the load script (make bench)")
	loadDuration = flag.Duration("load.duration", 10*time.Second, "measured time of each scenario in each round")
	loadWarmup   = flag.Duration("load.warmup", time.Second, "warm-up of each profiled scenario (-load.profile), on the same connections")
	loadSlice    = flag.Duration("load.slice", 500*time.Millisecond, "the scenarios of a round take turns in slices this long (one warm-up slice each), so that every ratio compares the same machine")
	loadRounds   = flag.Int("load.rounds", 5, "rounds; each runs every scenario once, in a rotated order; the report gives medians")
	loadConns    = flag.Int("load.conns", 32, "concurrent keep-alive connections (at most 32: reverse_proxy keeps 32 idle upstream connections)")
	// 9,000 rather than 5,000: the tokens are spread over the slices, so a slice's
	// share lasts a short burst of its 500 ms: with 5,000, about 35 ms at 5 s a
	// scenario (11 slices) and 18 ms at make bench's 10 s (21); with 9,000, 65 and
	// 31 ms. The shorter the burst, the more its start and /proc's 10 ms CPU ticks
	// weigh: other processes seemed to take 0.07-0.25 cores in 35 ms bursts,
	// 0.02-0.10 in 65 ms ones (docs/PERFORMANCE.md, 2026-11-27). The bearer cache's
	// 10,000 entries bound it: each token must be remembered when it is minted.
	loadTokens  = flag.Int("load.tokens", 9000, "distinct tokens minted at the start of each round for the new-token scenario, each sent once, spread over its slices (at most the bearer cache's 10,000)")
	loadProfile = flag.String("load.profile", "", "directory for CPU profiles of caddy (admin /debug/pprof/profile): each scenario once more after the rounds, in a slot of its own")
	loadWrk     = flag.Bool("load.wrk", false, "cross-check with wrk (if on PATH) after the rounds")
	loadOut     = flag.String("load.out", "", "also write the report (markdown) to this file")
	loadOnly    = flag.String("load.only", "", "comma-separated scenarios to run (bare is always run); default all")
)

// Goals: shares of the bare reverse_proxy throughput. Issue 19 sets the reused
// token's (0.95) and a fresh token's (0.85: a new token per request, each verified
// once and then cached); with the cache off every request verifies its ES256
// signature, which the earlier goal of 0.60 still bounds.
const (
	goalCached   = 0.95
	goalNewToken = 0.85
	goalNoCache  = 0.60
)

// noisyCores is the CPU (in cores) other processes may use during a measured
// scenario before the report warns that it was disturbed.
const noisyCores = 0.25

// scenario is one kind of request, sent by every connection until the time is up
// (or, with pool, each request of pool once).
type scenario struct {
	name, what string
	warm, req  []byte
	pool       [][]byte
}

// result is one measured run of a scenario: its ProcessCPU is caddy's, its
// SelfCPU the load generator's.
type result struct {
	loadgen.Result
	name          string
	otherFraction float64 // the machine's CPU used by other processes, in cores
}

// TestLoad is the load script: one Caddy, every scenario interleaved over
// several rounds, medians, ratios to the bare reverse_proxy and the goals. It
// reports a missed goal (MISS) but fails only when something errs.
func TestLoad(t *testing.T) {
	if !*loadOn {
		t.Skip("the load script runs with -args -load (make bench)")
	}
	if *loadConns < 1 || *loadConns > 32 || *loadRounds < 1 || *loadDuration < time.Second || *loadSlice <= 0 || *loadSlice > *loadDuration {
		t.Fatal("need 1 <= -load.conns <= 32, -load.rounds >= 1, -load.duration >= 1s, 0 < -load.slice <= -load.duration")
	}
	s := startSite(t, 8)
	host := strings.TrimPrefix(s.URL, "http://")
	if s.pid == 0 {
		t.Log("caddy's pid not found: no CPU figures")
	}

	// Every request carries the same Authorization header (but the new-token one),
	// so that the requests cost the load generator and Caddy's parser the same.
	base := []scenario{
		{name: "bare", what: "reverse_proxy alone (GET /bare/x)", req: getRequest(host, "/bare/x", s.token)},
		{name: "headers", what: "reverse_proxy with the identity headers palmgate_bearer sets, set by request_header instead (GET /headers/x)", req: getRequest(host, "/headers/x", s.token)},
		{name: "cached", what: "palmgate_bearer + reverse_proxy, reused token (GET /cached/x)", req: getRequest(host, "/cached/x", s.token)},
		{name: "stripped", what: "palmgate_bearer with strip_token + reverse_proxy, reused token: the upstream gets the identity headers, not the token (GET /stripped/x)", req: getRequest(host, "/stripped/x", s.token)},
		{name: "uncached", what: "palmgate_bearer + reverse_proxy, cache_size -1 (GET /uncached/x)", req: getRequest(host, "/uncached/x", s.token)},
		{name: "newtoken", what: fmt.Sprintf("palmgate_bearer + reverse_proxy, a new token per request (%d tokens, GET /cached/x)", *loadTokens)},
		{name: "check", what: "/oauth2/check?scope=openid, reused token", req: getRequest(host, "/oauth2/check?scope=openid", s.token)},
	}
	for i := range base {
		base[i].warm = base[i].req
		if base[i].name == "newtoken" { // warm up on the same code path: every request verifies a signature
			base[i].warm = getRequest(host, "/uncached/x", s.token)
		}
	}
	if *loadOnly != "" {
		only := strings.Split("bare,"+*loadOnly, ",")
		base = slices.DeleteFunc(base, func(sc scenario) bool { return !slices.Contains(only, sc.name) })
	}

	// newtoken's tokens are minted at the start of each round, as an application
	// would get them: this instance's bearer cache remembers what it issues
	// (up to its 10,000 entries), so that their first use costs no signature check.
	hasNewToken := slices.ContainsFunc(base, func(sc scenario) bool { return sc.name == "newtoken" })
	mintPool := func() [][]byte {
		if !hasNewToken {
			return nil
		}
		mintStart := time.Now()
		var pool [][]byte
		for _, tok := range s.mint(t, *loadTokens) {
			pool = append(pool, getRequest(host, "/cached/x", tok))
		}
		fmt.Printf("minted %d access tokens by refresh grants in %s\n", *loadTokens, time.Since(mintStart).Round(time.Millisecond))
		return pool
	}

	results := map[string][]result{}
	for r := range *loadRounds {
		pool := mintPool()
		rs, err := runRound(s, host, loadgen.Rotate(base, r), pool)
		if err != nil {
			t.Fatalf("round %d: %v", r+1, err)
		}
		for _, res := range rs {
			results[res.name] = append(results[res.name], res)
			fmt.Printf("round %d  %-9s %9.0f req/s  p50 %-9s p99 %-9s caddy %5.1f µs/req  load generator %5.1f µs/req  other processes %.2f cores\n",
				r+1, res.name, res.Rate(), res.P50, res.P99, perReq(res.ProcessCPU, res), perReq(res.SelfCPU, res), res.otherFraction)
		}
	}
	if *loadProfile != "" { // each scenario once more, in a slot of its own
		for _, sc := range base {
			if sc.name == "newtoken" {
				sc.pool = mintPool()
			}
			if _, err := run(s, host, sc, filepath.Join(*loadProfile, sc.name+".pprof")); err != nil {
				t.Fatalf("profile of %s: %v", sc.name, err)
			}
		}
	}

	report := summarize(base, results)
	if *loadWrk {
		report += wrkCrossCheck(t, s, base)
	}
	fmt.Print("\n" + report)
	if *loadOut != "" {
		if err := os.WriteFile(*loadOut, []byte(report), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func perReq(d time.Duration, r result) float64 {
	return float64(d.Microseconds()) / float64(r.Ops)
}

// runRound measures one round: every scenario of base on connections of its
// own, in slices of -load.slice taking turns (loadgen.Interleave), until each
// has had -load.duration, so that a scenario and bare see the same machine. A
// pool (newtoken's) is spread evenly over the slices, the warm-up's included:
// each of its tokens is sent once.
func runRound(s *site, host string, base []scenario, pool [][]byte) ([]result, error) {
	turns := max(1, int((*loadDuration+*loadSlice-1) / *loadSlice))
	var sides []loadgen.Side
	for _, sc := range base {
		var next, limit atomic.Int64
		ops := make([]loadgen.Op, *loadConns)
		for w := range ops {
			c, err := loadgen.Dial(host)
			if err != nil {
				return nil, err
			}
			defer c.Close()
			ops[w] = func(bool) error {
				req := sc.req
				if sc.name == "newtoken" {
					i := next.Add(1) - 1
					if i >= limit.Load() {
						return loadgen.ErrSliceDone
					}
					req = pool[i]
				}
				code, err := c.RoundTrip(req)
				if err == nil && code != http.StatusOK {
					err = fmt.Errorf("status %d", code)
				}
				return err
			}
		}
		side := loadgen.Side{Name: sc.name, Ops: ops, PID: s.pid}
		if sc.name == "newtoken" {
			share := int64(len(pool) / (turns + 1))
			side.BeforeSlice = func() { next.Store(min(next.Load(), limit.Load())); limit.Add(share) }
		}
		sides = append(sides, side)
	}
	rs, err := loadgen.Interleave(sides, *loadSlice, *loadDuration)
	if err != nil {
		return nil, err
	}
	out := make([]result, len(rs))
	for i, r := range rs {
		out[i] = result{Result: r.Result, name: base[i].name, otherFraction: r.OtherCores}
	}
	return out, nil
}

// run runs one scenario on fresh connections: the warm-up, then the measured
// part (the profiles of -load.profile).
func run(s *site, host string, sc scenario, profile string) (result, error) {
	ops := make([]loadgen.Op, *loadConns)
	var next atomic.Int64
	for w := range ops {
		c, err := loadgen.Dial(host)
		if err != nil {
			return result{}, err
		}
		defer c.Close()
		ops[w] = func(warm bool) error {
			req := sc.req
			switch {
			case warm:
				req = sc.warm
			case sc.pool != nil:
				i := next.Add(1) - 1
				if i >= int64(len(sc.pool)) {
					return loadgen.ErrPoolDone
				}
				req = sc.pool[i]
			}
			code, err := c.RoundTrip(req)
			if err == nil && code != http.StatusOK {
				err = fmt.Errorf("status %d", code)
			}
			return err
		}
	}
	o := loadgen.Options{Warmup: *loadWarmup, Duration: *loadDuration, PID: s.pid}
	if sc.pool != nil {
		o.Duration = 10 * *loadDuration // a bound; the pool runs out first
	}
	if profile != "" {
		seconds := max(1, int(loadDuration.Seconds()))
		if sc.pool != nil {
			seconds = 1
		}
		o.Profile = func() error { return loadgen.FetchProfile(s.AdminAddr, seconds, profile) }
	}
	res, err := loadgen.Run(ops, o)
	if err != nil {
		return result{}, err
	}
	return result{Result: res, otherFraction: res.OtherCores(res.ProcessCPU+res.SelfCPU, res.Elapsed)}, nil
}

// summarize returns the report: the machine, the table of medians, the goals.
func summarize(base []scenario, results map[string][]result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "machine: %s; caddy and the load generator share it\n", loadgen.Machine())
	fmt.Fprintf(&b, "method: %d rounds; in each, the %d scenarios take turns in %s slices (rotated; one warm-up slice each) until each has had %s; %d keep-alive connections each; medians over rounds; ratio = median of the per-round ratios to bare, each measured over the same stretch of time\n\n",
		*loadRounds, len(base), *loadSlice, *loadDuration, *loadConns)
	b.WriteString("| scenario | what | req/s | p50 | p99 | ratio to bare | caddy CPU µs/req | CPU ratio | load gen. CPU µs/req | other processes (cores) |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	ratios, cpuRatios := map[string]float64{}, map[string]float64{}
	var noisy []string
	for _, sc := range base {
		rs := results[sc.name]
		var rps, ratio, caddy, cpuRatio, self, other []float64
		for i, r := range rs {
			bare := results["bare"][i]
			rps = append(rps, r.Rate())
			ratio = append(ratio, r.Rate()/bare.Rate())
			caddy = append(caddy, perReq(r.ProcessCPU, r))
			cpuRatio = append(cpuRatio, perReq(bare.ProcessCPU, bare)/perReq(r.ProcessCPU, r))
			self = append(self, perReq(r.SelfCPU, r))
			other = append(other, r.otherFraction)
			if r.otherFraction > noisyCores {
				noisy = append(noisy, fmt.Sprintf("round %d %s (%.2f cores)", i+1, sc.name, r.otherFraction))
			}
		}
		ratios[sc.name], cpuRatios[sc.name] = loadgen.Median(ratio), loadgen.Median(cpuRatio)
		fmt.Fprintf(&b, "| %s | %s | %.0f | %s | %s | %.2f | %.1f | %.2f | %.1f | %.2f |\n", sc.name, sc.what, loadgen.Median(rps),
			loadgen.MedianDuration(rs, func(r result) time.Duration { return r.P50 }), loadgen.MedianDuration(rs, func(r result) time.Duration { return r.P99 }),
			ratios[sc.name], loadgen.Median(caddy), cpuRatios[sc.name], loadgen.Median(self), loadgen.Median(other))
	}
	b.WriteString("\nCPU ratio: caddy CPU per request of bare / of the scenario, the throughput ratio if Caddy had the CPUs to itself.\n")
	if len(noisy) > 0 {
		fmt.Fprintf(&b, "WARNING: other processes took more than %.2f cores during: %s; those figures are disturbed (the medians and the CPU ratio resist it best).\n",
			noisyCores, strings.Join(noisy, ", "))
	}
	b.WriteString("\n")
	for _, g := range []struct {
		name, scenario string
		goal           float64
	}{
		{"reused token (cached) / bare reverse_proxy", "cached", goalCached},
		{"every request verified (cache_size -1) / bare reverse_proxy", "uncached", goalNoCache},
		{"new token per request (distinct tokens) / bare reverse_proxy", "newtoken", goalNewToken},
	} {
		got, ok := ratios[g.scenario]
		if !ok {
			continue
		}
		verdict := "PASS"
		if got < g.goal {
			verdict = "MISS"
		}
		fmt.Fprintf(&b, "%s %s: %s (goal >= %.2f; CPU ratio %.2f)\n", verdict, g.name, loadgen.RatioText(got, g.goal), g.goal, cpuRatios[g.scenario])
	}
	if headers, ok := ratios["headers"]; ok && ratios["cached"] > 0 {
		fmt.Fprintf(&b, "the identity headers alone, set by Caddy's request_header (headers / bare): %.2f; palmgate_bearer, which checks the token and sets them (cached / headers): %.2f\n",
			headers, ratios["cached"]/headers)
	}
	if stripped, ok := ratios["stripped"]; ok {
		fmt.Fprintf(&b, "info reused token with strip_token (stripped / bare), not deciding: %.2f (CPU ratio %.2f); the goal is the default's, which forwards the token\n",
			stripped, cpuRatios["stripped"])
	}
	return b.String()
}

// wrkCrossCheck measures the fixed-request scenarios once more with wrk, a load
// generator in C, when it is installed.
func wrkCrossCheck(t *testing.T, s *site, base []scenario) string {
	path, err := exec.LookPath("wrk")
	if err != nil {
		return "\nwrk cross-check: wrk is not installed (apt-get install wrk)\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nwrk cross-check (wrk -t2 -c%d -d%s, once each):\n", *loadConns, *loadDuration)
	var bare float64
	for _, sc := range base {
		if sc.pool != nil || sc.req == nil {
			continue
		}
		path0 := strings.Fields(string(sc.req))[1]
		out, err := exec.Command(path, "-t2", fmt.Sprintf("-c%d", *loadConns), "-d"+loadDuration.String(), "--latency",
			"-H", "Authorization: Bearer "+s.token, s.URL+path0).CombinedOutput()
		if err != nil {
			t.Fatalf("wrk: %v\n%s", err, out)
		}
		var rps float64
		var p50, p99 string
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) == 2 && f[0] == "Requests/sec:":
				rps, _ = strconv.ParseFloat(f[1], 64)
			case len(f) == 2 && f[0] == "50%":
				p50 = f[1]
			case len(f) == 2 && f[0] == "99%":
				p99 = f[1]
			case strings.Contains(line, "Non-2xx"):
				t.Fatalf("wrk %s: %s", path0, line)
			}
		}
		if sc.name == "bare" {
			bare = rps
		}
		fmt.Fprintf(&b, "  %-9s %9.0f req/s  p50 %-9s p99 %-9s ratio %.2f\n", sc.name, rps, p50, p99, rps/bare)
	}
	return b.String()
}
