package agent

import (
	"context"
	"testing"
	"time"

	"github.com/palmgate/palmgate/storage/memstore"
)

// TestLeaderboardEarliestUnderClockSkew: a human's earliestRegisteredAt is the
// registration time of their first agent as the registry records it, also when
// that agent was registered by an instance whose clock runs behind the one that
// registered a later agent (instances on one store, or one clock stepped back):
// the entry then takes the earlier time, as a removal's recomputation would.
func TestLeaderboardEarliestUnderClockSkew(t *testing.T) {
	store := memstore.New()
	t.Cleanup(func() { _ = store.Close() })
	ahead, behind := newHarnessOn(t, store), newHarnessOn(t, store)
	behind.clock.Set(ahead.clock.Now().Add(-2 * time.Second))

	ahead.register(t, newTestAgent(t, "skew-first", "skew-1"), "alice")
	s := behind.init(t, newTestAgent(t, "skew-second", "skew-2"))
	human := behind.scan(t, s, "alice").HumanID
	earliest := time.Time(behind.session(t, s.ID).RegisteredAt)

	board, err := newHarnessOn(t, store).reg.Leaderboard(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(board) != 1 || board[0].HumanID != human || board[0].AgentCount != 2 {
		t.Fatalf("leaderboard = %+v, want alice with 2 agents", board)
	}
	if got := time.Time(board[0].EarliestRegisteredAt); !got.Equal(earliest.Truncate(time.Millisecond)) {
		t.Errorf("earliestRegisteredAt = %s, want %s (the agent registered at the earlier time)",
			got.Format(time.RFC3339Nano), earliest.Format(time.RFC3339Nano))
	}
}
