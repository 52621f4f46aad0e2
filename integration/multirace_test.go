package integration

import (
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/pgtest"
)

// raceRounds is how many single-use things each race of TestMultiInstanceRaces
// prepares, and racers how many requests race for each, half at each instance:
// two at one instance can share a grouped commit, two at different instances
// race two transactions.
const (
	raceRounds = 12
	racers     = 4
)

// raceAll fires racers requests (fire) for each of the rounds, all at once,
// alternating between the instances, and returns their statuses by round.
func raceAll(t *testing.T, p *pair, rounds int, fire func(e *env, round int) int) [][]int {
	t.Helper()
	statuses := make([][]int, rounds)
	for i := range statuses {
		statuses[i] = make([]int, racers)
	}
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range rounds {
		for j := range racers {
			e := p.a
			if j%2 == 1 {
				e = p.b
			}
			wg.Go(func() {
				<-gate
				statuses[i][j] = fire(e, i)
			})
		}
	}
	close(gate)
	wg.Wait()
	return statuses
}

// expectOneWinner fails unless exactly one racer of each round got win, and the
// others lose (never a 5xx).
func expectOneWinner(t *testing.T, what string, statuses [][]int, win, lose int) {
	t.Helper()
	for i, st := range statuses {
		wins := 0
		for _, s := range st {
			switch s {
			case win:
				wins++
			case lose:
			default:
				t.Errorf("%s, round %d: a racer got %d (statuses %v), want %d or %d", what, i, s, st, win, lose)
			}
		}
		if wins != 1 {
			t.Errorf("%s, round %d: %d racers won (statuses %v), want exactly one", what, i, wins, st)
		}
	}
}

// inParallel runs fn(i) for i < n, a few at a time.
func inParallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 6)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			fn(i)
		})
	}
	wg.Wait()
}

// TestMultiInstanceRaces: two instances over one PostgreSQL, and requests racing
// for single-use things, several at each instance at once (so that they meet both
// in one instance's grouped commits and across instances): each code, refresh
// token and palm challenge has exactly one winner, and a read-modify-write
// counter (one human's agentCount, which every registration of the human
// increments) equals the number of registrations that won. It fails when
// PostgreSQL's isolation is lowered from SERIALIZABLE to READ COMMITTED, and when
// the members of a group commit together although they conflict (both checked
// by hand: docs/SECURITY.md).
func TestMultiInstanceRaces(t *testing.T) {
	t.Parallel()
	c := newOIDCClient("race", "")
	p := startPair(t, pgtest.NewCluster(t).DSN(t), []oidcClient{c}, false)
	a, b := p.a, p.b
	tokenForm := func(code string) url.Values {
		return url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {c.redirects[0]},
			"client_id": {c.id}, "client_secret": {c.secret}}
	}

	t.Run("codes", func(t *testing.T) {
		codes := make([]string, raceRounds)
		inParallel(raceRounds, func(i int) { codes[i] = p.loginAt(t, a, c, a.subject("race-code")) })
		statuses := raceAll(t, p, raceRounds, func(e *env, i int) int {
			return e.postToken(t, tokenForm(codes[i])).Status
		})
		expectOneWinner(t, "the same code redeemed at A and B", statuses, http.StatusOK, http.StatusBadRequest)
	})

	t.Run("refresh tokens", func(t *testing.T) {
		refresh := make([]string, raceRounds)
		inParallel(raceRounds, func(i int) {
			refresh[i] = a.redeem(t, c, p.loginAt(t, a, c, a.subject("race-refresh"))).refresh
		})
		statuses := raceAll(t, p, raceRounds, func(e *env, i int) int {
			return e.postToken(t, refreshForm(c, refresh[i])).Status
		})
		expectOneWinner(t, "the same refresh token used at A and B", statuses, http.StatusOK, http.StatusBadRequest)
	})

	t.Run("registrations of one human", func(t *testing.T) {
		owner := a.subject("race-owner")
		agents := make([]*agent, raceRounds)
		sessions := make([]session, raceRounds)
		challenges := make([]challengeInfo, raceRounds)
		inParallel(raceRounds, func(i int) { // at A, whose URL is the issuer's
			agents[i] = newAgent(t, fmt.Sprintf("race-agent-%d-%s", i, randHex(4)))
			sessions[i] = a.initSession(t, agents[i].registration(time.Now()))
			challenges[i] = a.verifyInfo(t, sessions[i])
		})
		statuses := raceAll(t, p, raceRounds, func(e *env, i int) int {
			return e.devScan(t, challenges[i], owner).Status
		})
		expectOneWinner(t, "the same palm challenge completed at A and B", statuses, http.StatusOK, http.StatusConflict)
		human := ""
		for i, s := range sessions {
			if st := b.status(t, s.ID); str(st["status"]) != "completed" {
				t.Errorf("session %d: %v, want completed", i, st)
			}
			l := a.lookupDevice(t, agents[i].deviceID)
			if !l.Registered || (human != "" && l.HumanID != human) {
				t.Fatalf("agent %d: %+v, want registered to the one human %s", i, l, human)
			}
			human = l.HumanID
		}
		// Every registration incremented the human's agentCount: none may be lost.
		waitFor(t, "the leaderboard counts every registration", leaderboardMax+observeSlack, time.Now(), func() string {
			for _, x := range a.leaderboard(t, "") {
				if x.HumanID == human {
					if x.AgentCount != raceRounds {
						return fmt.Sprintf("agentCount %d, want %d", x.AgentCount, raceRounds)
					}
					return ""
				}
			}
			return "the human is not on the leaderboard"
		})
	})
}
