package integration

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
)

// TestLeaderboardOrdering registers nine agents for five humans, interleaved so
// that counts tie, and checks humans, counts, earliest times, order and limit.
func TestLeaderboardOrdering(t *testing.T) {
	t.Parallel()
	e := start(t, testserver.Options{})
	subjects := map[string]string{}
	for _, who := range []string{"alice", "bob", "carol", "dave", "erin"} {
		subjects[who] = e.subject(who)
	}
	// bob first; carol's first agent before erin's; alice ends with three.
	order := []string{"bob", "carol", "alice", "erin", "dave", "alice", "carol", "erin", "alice"}
	regs := map[string][]registered{}
	for i, who := range order {
		a := newAgent(t, fmt.Sprintf("lb-%s-%d", who, i))
		regs[who] = append(regs[who], e.register(t, a, subjects[who]))
		time.Sleep(3 * time.Millisecond) // distinct registeredAt milliseconds
	}

	humans := map[string]string{} // humanId -> who
	for who, rs := range regs {
		for _, r := range rs[1:] {
			if r.humanID != rs[0].humanID {
				t.Errorf("%s's agents belong to different humans: %s and %s", who, rs[0].humanID, r.humanID)
			}
		}
		if other, dup := humans[rs[0].humanID]; dup {
			t.Errorf("%s and %s share humanId %s", who, other, rs[0].humanID)
		}
		humans[rs[0].humanID] = who
	}

	var want []entry
	for _, who := range []string{"alice", "carol", "erin", "bob", "dave"} {
		rs := regs[who]
		want = append(want, entry{HumanID: rs[0].humanID, AgentCount: len(rs), EarliestRegisteredAt: rs[0].registeredAt})
	}
	lb := e.leaderboard(t, "")
	if fmt.Sprint(lb) != fmt.Sprint(want) {
		t.Errorf("leaderboard:\n got %+v\nwant %+v (alice, carol, erin, bob, dave)", lb, want)
	}
	if n := totalAgents(lb); n != len(order) {
		t.Errorf("agentCounts sum to %d, want %d registered agents", n, len(order))
	}

	for _, tc := range []struct {
		query string
		n     int
	}{
		{"?limit=1", 1}, {"?limit=2", 2}, {"?limit=3", 3}, {"?limit=5", 5}, {"?limit=6", 5}, {"?limit=1000", 5},
	} {
		t.Run("limit "+tc.query, func(t *testing.T) {
			got := e.leaderboard(t, tc.query)
			if fmt.Sprint(got) != fmt.Sprint(want[:tc.n]) {
				t.Errorf("leaderboard%s: %+v, want %+v", tc.query, got, want[:tc.n])
			}
		})
	}
	for _, q := range []string{"?limit=0", "?limit=-1", "?limit=abc", "?limit=1.5", "?limit=1e2", "?limit=%20"} {
		t.Run("bad limit "+q, func(t *testing.T) {
			e.do(t, "GET", "/v1/human/leaderboard"+q, nil).ExpectError(t, http.StatusBadRequest, "invalid_field", "")
		})
	}
}

// TestLeaderboardDefaultLimit checks that the leaderboard lists the top 100
// humans by default and more on request.
func TestLeaderboardDefaultLimit(t *testing.T) {
	t.Parallel()
	e := start(t, testserver.Options{Global: "rate_limit off"})
	const humans = 101
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range humans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			e.register(t, newAgent(t, fmt.Sprintf("crowd-%d", i)), e.subject(fmt.Sprint("crowd", i)))
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	all := e.leaderboard(t, "?limit=1000")
	if len(all) != humans || totalAgents(all) != humans {
		t.Fatalf("leaderboard?limit=1000: %d entries for %d agents, want %d humans with one agent each", len(all), totalAgents(all), humans)
	}
	def := e.leaderboard(t, "")
	if len(def) != 100 {
		t.Fatalf("default leaderboard: %d entries, want 100", len(def))
	}
	if fmt.Sprint(def) != fmt.Sprint(all[:100]) {
		t.Errorf("default leaderboard is not the top 100 of the full one")
	}
	if got := e.leaderboard(t, "?limit=101"); fmt.Sprint(got) != fmt.Sprint(all) {
		t.Errorf("leaderboard?limit=101 differs from ?limit=1000")
	}
}
