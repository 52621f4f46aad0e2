package agent

import (
	"context"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/cachestat"
)

// cacheStats returns h's cache counts by cache name.
func cacheStats(h *harness) map[string]cachestat.Stats {
	out := map[string]cachestat.Stats{}
	for _, s := range h.reg.CacheStats() {
		out[s.Cache] = s
	}
	return out
}

// expectCacheDelta checks that each cache moved from before by the hits and
// misses in want, and no cache not in want moved.
func expectCacheDelta(t *testing.T, what string, before, after map[string]cachestat.Stats, want map[string][2]uint64) {
	t.Helper()
	for name, a := range after {
		b := before[name]
		got := [2]uint64{a.Hits - b.Hits, a.Misses - b.Misses}
		if got != want[name] {
			t.Errorf("%s: cache %s moved by %d hits, %d misses; want %d, %d", what, name, got[0], got[1], want[name][0], want[name][1])
		}
	}
}

// TestCacheStats: each cache of the registry counts a miss when it sends a lookup
// to the store (or to the full key check) and a hit when it answers it.
func TestCacheStats(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	a := newTestAgent(t, "counted", "counted-key")
	h.register(t, a, "alice")

	check := func() {
		t.Helper()
		got, err := h.reg.VerifySignatureRequest(ctx, mustJSON(t, a.fields("hello", 1)))
		if err != nil || !got.Verified || !got.Registered {
			t.Fatalf("VerifySignatureRequest: %+v, %v", got, err)
		}
	}
	before := cacheStats(h)
	check()
	after := cacheStats(h)
	// The key's full check at parse time, whose point the verification takes:
	// one lookup of the key a request, counted once.
	expectCacheDelta(t, "first signature check", before, after, map[string][2]uint64{
		CacheRegisteredKeys: {0, 1}, CacheValidKeys: {0, 1}, CacheAbsentKeys: {0, 1},
	})
	before = after
	check()
	after = cacheStats(h)
	expectCacheDelta(t, "second signature check", before, after, map[string][2]uint64{
		CacheRegisteredKeys: {1, 0}, CacheValidKeys: {1, 0},
	})

	before = after
	h.lookupDevice(t, a.deviceID)
	h.lookupDevice(t, a.deviceID)
	after = cacheStats(h)
	expectCacheDelta(t, "two lookups by deviceId", before, after, map[string][2]uint64{
		CacheRegisteredAgents: {1, 1},
	})

	before = after
	for range 2 {
		if _, err := h.reg.Leaderboard(ctx, 10); err != nil {
			t.Fatal(err)
		}
	}
	after = cacheStats(h)
	expectCacheDelta(t, "two leaderboard reads", before, after, map[string][2]uint64{
		CacheLeaderboard: {1, 1},
	})
	before = after
	h.clock.Advance(leaderboardMaxAge + time.Millisecond)
	if _, err := h.reg.Leaderboard(ctx, 10); err != nil {
		t.Fatal(err)
	}
	expectCacheDelta(t, "a leaderboard read past its bound", before, cacheStats(h), map[string][2]uint64{
		CacheLeaderboard: {0, 1},
	})
}

// BenchmarkVerifyKnownAgent is a signature check of a registered agent whose key
// every cache already holds: the parse, the Ed25519 verification and the cache
// lookups (with their hit counters), in parallel, and no store read. (The
// harness's helpers take a *testing.T: set up with a bare one, which nothing
// fails.)
func BenchmarkVerifyKnownAgent(b *testing.B) {
	t := &testing.T{}
	h := newHarness(t)
	a := newTestAgent(t, "bench", "bench-key")
	h.register(t, a, "alice")
	body := mustJSON(t, a.fields("hello from a known agent", 1))
	ctx := context.Background()
	if got, err := h.reg.VerifySignatureRequest(ctx, body); err != nil || !got.Registered {
		b.Fatalf("VerifySignatureRequest: %+v, %v", got, err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := h.reg.VerifySignatureRequest(ctx, body); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
