package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/loadgen"
)

// TestSummarizeSeparatesTheHeadersFromTheCheck: the report gives what the
// identity headers cost alone (headers / bare) and what palmgate_bearer costs
// beyond them (cached / headers), from the same rounds' ratios to bare.
func TestSummarizeSeparatesTheHeadersFromTheCheck(t *testing.T) {
	base := []scenario{{name: "bare"}, {name: "headers"}, {name: "cached"}}
	results := map[string][]result{
		"bare":    {resultAt("bare", 1000)},
		"headers": {resultAt("headers", 940)},
		"cached":  {resultAt("cached", 960)},
	}
	report := summarize(base, results)
	for _, want := range []string{
		"(headers / bare): 0.94;",
		"(cached / headers): 1.02",
		"PASS reused token (cached) / bare reverse_proxy: 0.96",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q:\n%s", want, report)
		}
	}
	if report := summarize(base[:1], map[string][]result{"bare": results["bare"]}); strings.Contains(report, "headers / bare") || strings.Contains(report, "strip_token") {
		t.Errorf("a report without the headers and stripped scenarios names them:\n%s", report)
	}
}

// TestSummarizeStrippedInforms: the reused token with strip_token is reported
// beside the goal, never as the goal's figure: the goal is the default's.
func TestSummarizeStrippedInforms(t *testing.T) {
	base := []scenario{{name: "bare"}, {name: "cached"}, {name: "stripped"}}
	report := summarize(base, map[string][]result{
		"bare":     {resultAt("bare", 1000)},
		"cached":   {resultAt("cached", 930)},
		"stripped": {resultAt("stripped", 980)},
	})
	for _, want := range []string{
		"MISS reused token (cached) / bare reverse_proxy: 0.93",
		"info reused token with strip_token (stripped / bare), not deciding: 0.98",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q:\n%s", want, report)
		}
	}
}

// resultAt is one second of a scenario at perSecond requests, with a second of
// CPU on each side.
func resultAt(name string, perSecond int) result {
	return result{name: name, Result: loadgen.Result{Ops: perSecond, Elapsed: time.Second, ProcessCPU: time.Second, SelfCPU: time.Second}}
}
