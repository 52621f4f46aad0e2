package agent

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// TestLeaderboardCache: a cached leaderboard (entries and its fill) is dropped as
// soon as a registration commits, at every limit, and lives at most
// leaderboardMaxAge otherwise.
func TestLeaderboardCache(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	read := func(limit int) ([]LeaderboardEntry, []LeaderboardEntry) {
		t.Helper()
		e, err := h.reg.Leaderboard(ctx, limit)
		if err != nil {
			t.Fatal(err)
		}
		j, fill, err := h.reg.LeaderboardFill(ctx, limit)
		if err != nil {
			t.Fatal(err)
		}
		if fill == 0 {
			t.Fatalf("limit %d: a read with no registration meanwhile was not cached", limit)
		}
		return e, j
	}
	for i := range 6 {
		h.clock.Advance(time.Millisecond)
		h.register(t, newTestAgent(t, "cache-"+strconv.Itoa(i), "cache-"+strconv.Itoa(i)), "alice")
		for _, limit := range []int{1, 100, 1000} {
			e, j := read(limit)
			if len(e) != 1 || e[0].AgentCount != int64(i+1) || len(j) != 1 || j[0].AgentCount != int64(i+1) {
				t.Fatalf("after %d registrations, limit %d: entries %+v, JSON %+v", i+1, limit, e, j)
			}
		}
	}
	// An aged cache is not answered (the bound on other instances' writes):
	// age a deliberately wrong one.
	h.register(t, newTestAgent(t, "cache-bob", "cache-bob"), "bob")
	if e, _ := read(100); len(e) != 2 {
		t.Fatalf("leaderboard %+v, want alice and bob", e)
	}
	h.reg.board.mu.Lock()
	h.reg.board.readAt = h.clock.Now().Add(-leaderboardMaxAge)
	h.reg.board.entries = h.reg.board.entries[:1]
	h.reg.board.complete = true
	h.reg.board.mu.Unlock()
	if e, _ := read(100); len(e) != 2 {
		t.Fatalf("an aged cache was answered: %+v", e)
	}
}
