package service

import (
	"fmt"
	"strings"
	"time"

	"github.com/palmgate/palmgate/internal/loadgen"
)

// baselines: the scenario each one is a share of, and the factor applied to the
// baseline's rate (a registration needs two synced commits: its ceiling is half
// the commit rate).
var baselines = map[string]struct {
	base   string
	factor float64
}{
	"minimal-proc": {"minimal", 1}, "verify-reg": {"minimal", 1}, "verify-unreg": {"minimal", 1},
	"device": {"static", 1}, "public-key": {"static", 1}, "leaderboard": {"static-board", 1},
	"static": {"ok-proc", 1}, "minimal-caddy": {"minimal-proc", 1},
	"exchange": {"signs", 1}, "exchange-rs": {"signs-rs", 1},
	"token-caddy": {"signs", 1}, "token-caddy-rs": {"signs-rs", 1},
	"register": {"commits", 0.5},
}

// ratioOf is the median over rounds of a's figure over b's, both of the same round.
func ratioOf(results map[string][]result, a, b string, f func(result) float64) (float64, bool) {
	ra, rb := results[a], results[b]
	if len(ra) == 0 || len(rb) == 0 {
		return 0, false
	}
	var v []float64
	for i := range min(len(ra), len(rb)) {
		v = append(v, f(ra[i])/f(rb[i]))
	}
	return loadgen.Median(v), true
}

// totalCPU is the CPU one operation took in the server and this process.
func totalCPU(r result) float64 { return perOp(r.ProcessCPU+r.SelfCPU, r) }

// summarize returns the report: the machine and method, one table of medians,
// the derived figures and the goals.
func summarize(scenarios []scenario, results map[string][]result, cfg SeedConfig) string {
	var b strings.Builder
	fmt.Fprintf(&b, "machine: %s; caddy, the load generator and the in-process baselines share it\n", loadgen.Machine())
	fmt.Fprintf(&b, "store: %d humans, %d agents (seeded, then copied for the run); the load generator writes raw HTTP/1.1 on keep-alive connections\n", cfg.Humans, cfg.Agents)
	fmt.Fprintf(&b, "method: %d rounds x %d scenarios in a rotated order; %s warm-up + %s measured each; request scenarios %d connections, registrations and commits %d workers; medians over rounds; a ratio is the median of the per-round ratios\n",
		*loadRounds, len(scenarios), *loadWarmup, *loadDuration, *loadConns, *loadAgents)
	for _, group := range interleavedGroups {
		var ran []string
		for _, name := range group {
			if len(results[interleavedName(name)]) > 0 {
				ran = append(ran, name)
			}
		}
		if len(ran) >= 2 {
			fmt.Fprintf(&b, "interleaved: once a round, %s also in turns of %s slices (one warm-up slice of each, then %s of each), so that their ratios compare the same machine\n",
				strings.Join(ran, ", "), *loadSlice, *loadDuration)
		}
	}
	b.WriteString("\n")
	b.WriteString("| scenario | what | ops/s | p50 | p99 | share of | ratio | CPU ratio | server CPU µs/op | this process CPU µs/op | others (cores) |\n")
	b.WriteString("|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|\n")
	rate := func(r result) float64 { return r.Rate() }
	var noisy []string
	for _, sc := range scenarios {
		rs := results[sc.name]
		if len(rs) == 0 {
			continue
		}
		share, ratio, cpuRatio := "", "", ""
		if bl, ok := baselines[sc.name]; ok {
			if x, ok := ratioOf(results, sc.name, bl.base, rate); ok {
				share = bl.base
				if bl.factor != 1 {
					share = fmt.Sprintf("%g x %s", bl.factor, bl.base)
				}
				ratio = fmt.Sprintf("%.2f", x/bl.factor)
			}
			if y, ok := ratioOf(results, bl.base, sc.name, totalCPU); ok && bl.factor == 1 {
				cpuRatio = fmt.Sprintf("%.2f", y)
			}
		}
		server := "—"
		if sc.server != "self" {
			server = fmt.Sprintf("%.1f", loadgen.MedianOf(rs, func(r result) float64 { return perOp(r.ProcessCPU, r) }))
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f %s/s | %s | %s | %s | %s | %s | %s | %.1f | %.2f |\n", sc.name, sc.what,
			loadgen.MedianOf(rs, rate), sc.unit, loadgen.MedianDuration(rs, func(r result) time.Duration { return r.P50 }),
			loadgen.MedianDuration(rs, func(r result) time.Duration { return r.P99 }), share, ratio, cpuRatio, server,
			loadgen.MedianOf(rs, func(r result) float64 { return perOp(r.SelfCPU, r) }), loadgen.MedianOf(rs, func(r result) float64 { return r.otherCores }))
		for i, r := range rs {
			if r.otherCores > noisyCores {
				noisy = append(noisy, fmt.Sprintf("round %d %s (%.2f)", i+1, sc.name, r.otherCores))
			}
			if r.PoolExhaustedAt > 0 && r.PoolExhaustedAt < *loadDuration*9/10 {
				noisy = append(noisy, fmt.Sprintf("round %d %s: its pool ran out after %s", i+1, sc.name, r.PoolExhaustedAt.Round(time.Millisecond)))
			}
		}
	}
	b.WriteString("\nserver CPU: the caddy process (or the minimal server's own process, or caddy-minimal's for minimal-caddy); for in-process scenarios all CPU is this process's.\n")
	b.WriteString("CPU ratio: CPU per operation (server + load generator) of the baseline over the scenario's: the ratio if the two cores served only these processes, which other processes' load disturbs less than the throughput ratio.\n")
	if len(noisy) > 0 {
		fmt.Fprintf(&b, "WARNING: disturbed figures (other processes above %.2f cores, or a short pool): %s\n", noisyCores, strings.Join(noisy, ", "))
	}

	b.WriteString("\nDerived:\n")
	if rs := results["ed25519"]; len(rs) > 0 {
		fmt.Fprintf(&b, "- one ed25519.Verify costs %.1f µs of CPU (%d goroutines, %.0f verifies/s)\n",
			loadgen.MedianOf(rs, totalCPU), procs(), loadgen.MedianOf(rs, rate))
	}
	if x, ok := ratioOf(results, "minimal", "static", rate); ok {
		fmt.Fprintf(&b, "- the minimal server answers %.2fx of Caddy's static respond (same cores, same load generator)\n", x)
	}
	if x, ok := ratioOf(results, "minimal", "ed25519", rate); ok {
		fmt.Fprintf(&b, "- the minimal server reaches %.2f of the raw Verify rate; palmgate (registered) %.2f\n", x,
			func() float64 { y, _ := ratioOf(results, "verify-reg", "ed25519", rate); return y }())
	}
	if ceiling, tax, ok := caddyCeiling(results); ok {
		fmt.Fprintf(&b, "- Caddy's own cost of a request: %.1f µs of server CPU (static through Caddy minus ok-proc); with it, verify/signature through Caddy at no cost beyond the minimal server's would reach %.2f of minimal-proc (CPU)\n", tax, ceiling)
	}
	if x, cpu, tax, ok := caddyMeasured(results); ok {
		fmt.Fprintf(&b, "- what Caddy costs the minimal handler, measured: minimal-caddy / minimal-proc = %.2f (CPU ratio %.2f), %.1f µs of server CPU a request more in Caddy: the ceiling of 1' for a handler that costs what the minimal one does\n", x, cpu, tax)
	}
	p99 := func(r result) float64 { return float64(r.P99) }
	for _, l := range []string{"device", "public-key"} {
		if x, ok := ratioOf(results, "leaderboard", l, p99); ok {
			fmt.Fprintf(&b, "- leaderboard p99 / %s lookup p99 = %.2f\n", l, x)
		}
	}
	if rs := results["signs"]; len(rs) > 0 {
		fmt.Fprintf(&b, "- the three signatures of one exchange cost %.0f µs of CPU; an exchange costs %.0f µs (caddy + load generator)\n",
			loadgen.MedianOf(rs, totalCPU), loadgen.MedianOf(results["exchange"], totalCPU))
	}
	if rs := results["signs-rs"]; len(rs) > 0 {
		fmt.Fprintf(&b, "- with RS256 ID tokens, the three signatures cost %.0f µs of CPU; an exchange costs %.0f µs (caddy + load generator)\n",
			loadgen.MedianOf(rs, totalCPU), loadgen.MedianOf(results["exchange-rs"], totalCPU))
	}
	for _, pair := range interleavedRatios {
		if x, ok := ratioOf(results, interleavedName(pair[0]), interleavedName(pair[1]), rate); ok {
			cpu, _ := ratioOf(results, interleavedName(pair[1]), interleavedName(pair[0]), totalCPU)
			fmt.Fprintf(&b, "- %s / %s measured interleaved (turns of %s slices, the same machine for both): %.2f (CPU ratio %.2f); per round %s\n",
				pair[0], pair[1], *loadSlice, x, cpu, perRound(results, pair[0], pair[1]))
		}
	}
	if rs := results["commits"]; len(rs) > 0 {
		fmt.Fprintf(&b, "- Badger's synced-commit rate with %d goroutines: %.0f/s, so a registration ceiling of %.0f/s\n",
			*loadAgents, loadgen.MedianOf(rs, rate), loadgen.MedianOf(rs, rate)/2)
		if gs := results["store-commits"]; len(gs) > 0 {
			fmt.Fprintf(&b, "- badgerstore's grouped commits, same goroutines: %.0f/s (%.1fx Badger's own)\n",
				loadgen.MedianOf(gs, rate), loadgen.MedianOf(gs, rate)/loadgen.MedianOf(rs, rate))
		}
	}

	b.WriteString("\nGoals (the throughput ratio decides; the CPU ratio is beside it):\n")
	deciding := true // false for a row another one decides
	goal := func(name, a, base string, factor, want float64, higher bool) {
		f := rate
		if !higher {
			f = p99
		}
		x, ok := ratioOf(results, a, base, f)
		if !ok {
			return
		}
		x /= factor
		verdict := "PASS"
		if (higher && x < want) || (!higher && x > want) {
			verdict = "MISS"
		}
		if !deciding {
			verdict = "info"
		}
		extra := ""
		if y, ok := ratioOf(results, base, a, totalCPU); ok && higher && factor == 1 {
			extra = fmt.Sprintf("; CPU ratio %.2f", y)
		}
		fmt.Fprintf(&b, "%s %s: %s (goal %s %.2f%s)\n", verdict, name, loadgen.RatioText(x, want), map[bool]string{true: ">=", false: "<="}[higher], want, extra)
	}
	// 1: against the minimal server in the load generator's own process, which
	// shares its runtime with the load generator (no second scheduler, no
	// process switch) and outruns the same server in a process of its own
	// (minimal-proc / minimal, 0.76 in the 2026-11-27 10:45 run). Caddy runs in
	// a process of its own, so 1' decides and this row informs.
	deciding = false
	goal("1. verify/signature, registered device / minimal server (in the load generator's process; 1' decides)", "verify-reg", "minimal", 1, goalVerify, true)
	goal("1. verify/signature, unregistered device / minimal server (in the load generator's process; 1' decides)", "verify-unreg", "minimal", 1, goalVerify, true)
	deciding = true
	// decide gives a ratio goal's row: from the interleaved results when they
	// were measured (the separate slots' row then informs only), else from the
	// slots.
	decide := func(name, a, base string, want float64) {
		if len(results[interleavedName(a)]) == 0 || len(results[interleavedName(base)]) == 0 {
			goal(name, a, base, 1, want, true)
			return
		}
		deciding = false
		goal(name+", separate slots, not deciding", a, base, 1, want, true)
		deciding = true
		goal(name+", interleaved", interleavedName(a), interleavedName(base), 1, want, true)
		fmt.Fprintf(&b, "     per round: %s\n", perRound(results, a, base))
	}
	decide("1'. verify/signature, registered device / minimal server (own process)", "verify-reg", "minimal-proc", goalVerify)
	decide("1'. verify/signature, unregistered device / minimal server (own process)", "verify-unreg", "minimal-proc", goalVerify)
	decide("1''. verify/signature, registered / minimal handler in Caddy (same Caddy, same request)", "verify-reg", "minimal-caddy", goalVerify)
	decide("1''. verify/signature, unregistered / minimal handler in Caddy (same Caddy, same request)", "verify-unreg", "minimal-caddy", goalVerify)
	for _, g := range []string{"device", "public-key"} {
		goal("2. "+g+" / static respond", g, "static", 1, goalRead, true)
	}
	goal("2. leaderboard / static respond of as long a body", "leaderboard", "static-board", 1, goalRead, true)
	for _, l := range []string{"device", "public-key"} {
		goal("2. leaderboard p99 / "+l+" lookup p99", "leaderboard", l, 1, goalLeaderP99, false)
	}
	decide("3. code exchange / its three signatures (RS256 ID tokens, the default)", "exchange-rs", "signs-rs", goalExchange)
	// 3': the same request answered by a token endpoint in Caddy that only signs
	// (bench/minimalcaddy), interleaved with the two: what HTTP, Caddy and the
	// load generator leave of goal 3, and palmgate's share of what they leave.
	for _, p := range [][3]string{{"token-caddy-rs", "signs-rs", "exchange-rs"}, {"token-caddy", "signs", "exchange"}} {
		ceiling, ok := ratioOf(results, interleavedName(p[0]), interleavedName(p[1]), rate)
		share, ok2 := ratioOf(results, interleavedName(p[2]), interleavedName(p[0]), rate)
		if ok && ok2 {
			fmt.Fprintf(&b, "info 3'. %s / %s, interleaved: %.2f (%.0f/s), the most goal 3 allows a token endpoint in this Caddy with this load generator; %s / %s: %.2f, palmgate's share of it\n",
				p[0], p[1], ceiling, loadgen.MedianOf(results[interleavedName(p[0])], rate), p[2], p[0], share)
		}
	}
	if rs := results["exchange"]; len(rs) > 0 {
		x := loadgen.MedianOf(rs, rate)
		verdict := "PASS"
		if x < goalExchangeRate {
			verdict = "MISS"
		}
		fmt.Fprintf(&b, "%s 3. code exchanges per second: %.0f (goal >= %.0f, with ES256 ID tokens)\n", verdict, x, goalExchangeRate)
	}
	goal("4. registrations / (synced commits / 2)", "register", "commits", 0.5, goalRegister, true)
	return b.String()
}

// perRound lists the per-round ratios of a's interleaved rate over b's, each
// with its turns (and a note where a pool ran out).
func perRound(results map[string][]result, a, b string) string {
	ra, rb := results[interleavedName(a)], results[interleavedName(b)]
	var out []string
	for i := range min(len(ra), len(rb)) {
		s := fmt.Sprintf("%.2f (%d turns", ra[i].Rate()/rb[i].Rate(), ra[i].turns)
		if ra[i].PoolExhaustedAt > 0 || rb[i].PoolExhaustedAt > 0 {
			s += ", a pool ran out"
		}
		if o := max(ra[i].otherCores, rb[i].otherCores); o > noisyCores {
			s += fmt.Sprintf(", others %.2f cores", o)
		}
		out = append(out, s+")")
	}
	return strings.Join(out, ", ")
}

// caddyCeiling is what Caddy's own layer costs a request (the server CPU of a
// static `respond` through Caddy minus that of the same answer from the minimal
// server's process, medians over rounds) and the best CPU ratio verify/signature
// could then reach against minimal-proc: minimal-proc's CPU per request over the
// same plus Caddy's cost, as if palmgate's handler cost exactly what the minimal
// handler does.
func caddyCeiling(results map[string][]result) (ceiling, tax float64, ok bool) {
	st, okp, mp := results["static"], results["ok-proc"], results["minimal-proc"]
	if len(st) == 0 || len(okp) == 0 || len(mp) == 0 {
		return 0, 0, false
	}
	server := func(r result) float64 { return perOp(r.ProcessCPU, r) }
	tax = loadgen.MedianOf(st, server) - loadgen.MedianOf(okp, server)
	minimal := loadgen.MedianOf(mp, totalCPU)
	return minimal / (minimal + tax), tax, true
}

// caddyMeasured is caddyCeiling measured directly: the minimal handler in Caddy
// (minimal-caddy) against the same handler in a process of its own
// (minimal-proc), as a throughput ratio and a CPU ratio (medians of the
// per-round ratios), and the server CPU a request that Caddy adds to it
// (medians over rounds).
func caddyMeasured(results map[string][]result) (ratio, cpuRatio, tax float64, ok bool) {
	mc, mp := results["minimal-caddy"], results["minimal-proc"]
	if len(mc) == 0 || len(mp) == 0 {
		return 0, 0, 0, false
	}
	ratio, _ = ratioOf(results, "minimal-caddy", "minimal-proc", func(r result) float64 { return r.Rate() })
	cpuRatio, _ = ratioOf(results, "minimal-proc", "minimal-caddy", totalCPU)
	server := func(r result) float64 { return perOp(r.ProcessCPU, r) }
	return ratio, cpuRatio, loadgen.MedianOf(mc, server) - loadgen.MedianOf(mp, server), true
}
