package edge

import (
	"testing"

	"github.com/palmgate/palmgate/core/agent"
)

// TestBoardEncodings: an encoding is reused for the same fill and limit only; a
// newer fill drops the older ones, an unfilled read (0) is never kept.
func TestBoardEncodings(t *testing.T) {
	var c boardEncodings
	one := []agent.LeaderboardEntry{{HumanID: "h1", AgentCount: 1}}
	two := []agent.LeaderboardEntry{{HumanID: "h1", AgentCount: 2}}
	enc := func(e []agent.LeaderboardEntry, fill uint64, limit int) string {
		t.Helper()
		b, err := c.encode(e, fill, limit)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	first := enc(one, 1, 100)
	if got := enc(two, 1, 100); got != first {
		t.Errorf("fill 1 again: %s, want the kept %s", got, first)
	}
	if got := enc(two, 1, 10); got == first {
		t.Errorf("another limit answered the kept encoding %s", got)
	}
	if got := enc(two, 2, 100); got == first {
		t.Errorf("a newer fill answered the older encoding %s", got)
	}
	if got := enc(one, 0, 100); got != first {
		t.Errorf("unfilled read: %s, want %s", got, first)
	}
	if _, ok := c.bytes[100]; !ok || c.fill != 2 {
		t.Errorf("cache holds fill %d %v, want fill 2 at limit 100", c.fill, c.bytes)
	}
	if got := enc(one, 1, 100); got != first {
		t.Errorf("an older fill: %s, want its own encoding %s", got, first)
	}
}
