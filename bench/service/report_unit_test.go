package service

import (
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/loadgen"
)

// measured is one round of a request scenario: ops in one second, with the
// server's and the load generator's CPU per operation.
func measured(ops int, serverUS, selfUS time.Duration) result {
	return result{Result: loadgen.Result{Ops: ops, Elapsed: time.Second,
		ProcessCPU: time.Duration(ops) * serverUS * time.Microsecond, SelfCPU: time.Duration(ops) * selfUS * time.Microsecond}}
}

// TestReportMinimalCaddy: the report gives verify/signature against the
// minimal handler in Caddy (ratio, CPU ratio, PASS or MISS) in the goal row
// after 1', and what Caddy costs the minimal handler (minimal-caddy /
// minimal-proc); without the scenario, neither line.
func TestReportMinimalCaddy(t *testing.T) {
	scenarios := []scenario{
		{name: "minimal-proc", unit: "req", server: "minproc"},
		{name: "minimal-caddy", unit: "req", server: "mincaddy"},
		{name: "verify-reg", unit: "req", server: "caddy"},
	}
	results := map[string][]result{
		"minimal-proc":  {measured(5000, 160, 40)}, // 200 µs a request
		"minimal-caddy": {measured(4000, 185, 40)}, // 225 µs
		"verify-reg":    {measured(3800, 190, 40)}, // 230 µs
	}
	report := summarize(scenarios, results, SeedConfig{Humans: 1, Agents: 1})
	wantInReport(t, report,
		"| minimal-caddy |  | 4000 req/s | 0s | 0s | minimal-proc | 0.80 | 0.89 | 185.0 |",
		"MISS 1'. verify/signature, registered device / minimal server (own process): 0.76 (goal >= 0.90; CPU ratio 0.87)",
		"PASS 1''. verify/signature, registered / minimal handler in Caddy (same Caddy, same request): 0.95 (goal >= 0.90; CPU ratio 0.98)",
		"minimal-caddy / minimal-proc = 0.80 (CPU ratio 0.89), 25.0 µs of server CPU a request more in Caddy",
	)

	results["verify-reg"] = []result{measured(3400, 200, 40)} // 240 µs: 0.85, CPU 0.94
	if report := summarize(scenarios, results, SeedConfig{}); !strings.Contains(report,
		"MISS 1''. verify/signature, registered / minimal handler in Caddy (same Caddy, same request): 0.85 (goal >= 0.90; CPU ratio 0.94)") {
		t.Errorf("want goal 1'' missed:\n%s", report)
	}

	delete(results, "minimal-caddy")
	if report := summarize(scenarios, results, SeedConfig{}); strings.Contains(report, "1''") || strings.Contains(report, "minimal-caddy /") {
		t.Errorf("without minimal-caddy, the report still compares with it:\n%s", report)
	}
}

// interleavedRound is one round of an interleaved measurement: measured, over
// turns slices.
func interleavedRound(ops int, serverUS, selfUS time.Duration, turns int) result {
	r := measured(ops, serverUS, selfUS)
	r.turns = turns
	return r
}

// TestReportInterleaved: with interleaved results, goal 3's ratio is decided
// by the interleaved row (PASS or MISS, with its per-round ratios and slice
// turns), and the separate slots' row stays as information only; without
// them, the slots' row decides as before.
func TestReportInterleaved(t *testing.T) {
	scenarios := []scenario{
		{name: "signs-rs", unit: "exchange's 3 signatures", server: "self"},
		{name: "exchange-rs", unit: "req", server: "caddy"},
	}
	results := map[string][]result{
		"signs-rs":                     {measured(1000, 0, 2000)},  // 2,000 µs
		"exchange-rs":                  {measured(600, 2400, 100)}, // 0.60 of it in its own slot
		interleavedName("signs-rs"):    {interleavedRound(1000, 0, 2000, 8), interleavedRound(1000, 0, 2000, 8)},
		interleavedName("exchange-rs"): {interleavedRound(850, 2250, 100, 8), interleavedRound(900, 2100, 100, 8)},
	}
	report := summarize(scenarios, results, SeedConfig{})
	wantInReport(t, report,
		"info 3. code exchange / its three signatures (RS256 ID tokens, the default), separate slots, not deciding: 0.60 (goal >= 0.80; CPU ratio 0.80)",
		"PASS 3. code exchange / its three signatures (RS256 ID tokens, the default), interleaved: 0.88 (goal >= 0.80; CPU ratio 0.88)",
		"per round: 0.85 (8 turns), 0.90 (8 turns)",
		"- exchange-rs / signs-rs measured interleaved",
	)
	if strings.Contains(report, "MISS 3.") || strings.Contains(report, "PASS 3. code exchange / its three signatures (RS256 ID tokens, the default):") {
		t.Errorf("the separate slots still decide goal 3:\n%s", report)
	}
	if strings.Contains(report, "3'.") {
		t.Errorf("3' reported without token-caddy-rs:\n%s", report)
	}
	results[interleavedName("token-caddy-rs")] = []result{interleavedRound(950, 2000, 100, 8), interleavedRound(950, 2000, 100, 8)}
	wantInReport(t, summarize(scenarios, results, SeedConfig{}),
		"info 3'. token-caddy-rs / signs-rs, interleaved: 0.95 (950/s), the most goal 3 allows a token endpoint in this Caddy with this load generator; exchange-rs / token-caddy-rs: 0.92, palmgate's share of it",
	)
	delete(results, interleavedName("token-caddy-rs"))

	results[interleavedName("exchange-rs")] = []result{interleavedRound(700, 2750, 100, 8), interleavedRound(750, 2600, 100, 6)}
	results[interleavedName("exchange-rs")][1].PoolExhaustedAt = time.Second
	report = summarize(scenarios, results, SeedConfig{})
	wantInReport(t, report,
		"MISS 3. code exchange / its three signatures (RS256 ID tokens, the default), interleaved: 0.72 (goal >= 0.80",
		"per round: 0.70 (8 turns), 0.75 (6 turns, a pool ran out)",
	)

	delete(results, interleavedName("exchange-rs"))
	delete(results, interleavedName("signs-rs"))
	report = summarize(scenarios, results, SeedConfig{})
	if !strings.Contains(report, "MISS 3. code exchange / its three signatures (RS256 ID tokens, the default): 0.60 (goal >= 0.80") ||
		strings.Contains(report, "interleaved") {
		t.Errorf("without interleaved results, the slots' row must decide:\n%s", report)
	}
}

// TestReportInterleavedVerify: goals 1' and 1” are decided by the
// interleaved results of verify/signature and its baselines when they ran.
func TestReportInterleavedVerify(t *testing.T) {
	scenarios := []scenario{
		{name: "minimal-proc", unit: "req", server: "minproc"},
		{name: "minimal-caddy", unit: "req", server: "mincaddy"},
		{name: "verify-reg", unit: "req", server: "caddy"},
	}
	results := map[string][]result{
		"minimal-proc":                   {measured(5000, 160, 40)},
		"minimal-caddy":                  {measured(4000, 185, 40)},
		"verify-reg":                     {measured(4000, 190, 40)}, // 0.80 of minimal-proc in the slots
		interleavedName("minimal-proc"):  {interleavedRound(5000, 160, 40, 10)},
		interleavedName("minimal-caddy"): {interleavedRound(4400, 185, 40, 10)},
		interleavedName("verify-reg"):    {interleavedRound(4600, 190, 40, 10)}, // 0.92 interleaved
	}
	report := summarize(scenarios, results, SeedConfig{})
	wantInReport(t, report,
		"info 1'. verify/signature, registered device / minimal server (own process), separate slots, not deciding: 0.80",
		"PASS 1'. verify/signature, registered device / minimal server (own process), interleaved: 0.92",
		"PASS 1''. verify/signature, registered / minimal handler in Caddy (same Caddy, same request), interleaved: 1.05",
		"- minimal-caddy / minimal-proc measured interleaved (turns of",
	)
	if strings.Contains(report, "MISS 1'") {
		t.Errorf("the separate slots still decide goal 1':\n%s", report)
	}
}

// TestReportInProcessMinimalInforms: the minimal server in the load
// generator's own process outruns the same server in a process of its own, so
// its row informs (info, whatever the ratio) and goal 1' decides.
func TestReportInProcessMinimalInforms(t *testing.T) {
	scenarios := []scenario{
		{name: "minimal", unit: "req", server: "self"},
		{name: "minimal-proc", unit: "req", server: "minproc"},
		{name: "verify-reg", unit: "req", server: "caddy"},
	}
	results := map[string][]result{
		"minimal":      {measured(6000, 0, 160)},
		"minimal-proc": {measured(5000, 160, 40)},
		"verify-reg":   {measured(4600, 190, 40)}, // 0.77 of minimal, 0.92 of minimal-proc
	}
	report := summarize(scenarios, results, SeedConfig{})
	wantInReport(t, report,
		"info 1. verify/signature, registered device / minimal server (in the load generator's process; 1' decides): 0.77 (goal >= 0.90",
		"PASS 1'. verify/signature, registered device / minimal server (own process): 0.92",
	)
	if strings.Contains(report, "MISS 1.") || strings.Contains(report, "PASS 1.") {
		t.Errorf("the in-process minimal server decides a goal:\n%s", report)
	}
}

// wantInReport checks that report holds each of lines.
func wantInReport(t *testing.T, report string, lines ...string) {
	t.Helper()
	for _, want := range lines {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q:\n%s", want, report)
		}
	}
}
