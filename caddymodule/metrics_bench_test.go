package caddymodule

import (
	"context"
	"testing"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/event"
)

// BenchmarkCountBearerDecision is what palmgate_bearer adds to an admitted
// request: the decision's outcome and a counter's Inc, with no allocation.
func BenchmarkCountBearerDecision(b *testing.B) {
	initMetrics()
	b.ReportAllocs()
	for b.Loop() {
		count(event.Event{Kind: event.Bearer, Outcome: bearer.Decision(nil)})
	}
}

// BenchmarkSinkSignatureCheck is what the app's sink adds to a signature check:
// a counter's Inc (signature checks are counted, not audited), no allocation.
func BenchmarkSinkSignatureCheck(b *testing.B) {
	sink := newEventSink(nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		sink(ctx, event.Event{Kind: event.SignatureCheck, Outcome: event.Registered})
	}
}

// BenchmarkSinkParallel is the same from every core at once (the counters are
// atomic: no lock).
func BenchmarkSinkParallel(b *testing.B) {
	sink := newEventSink(nil)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			sink(ctx, event.Event{Kind: event.SignatureCheck, Outcome: event.Registered})
		}
	})
}
