package integration

// Agent removal (issue 20) on two instances sharing PostgreSQL: one agent removed
// by the operator (the CLI, through the admin API of one instance), another by
// its human (the palm-verified agents page of the other, driven over HTTP with
// the dev simulated scan). Both instances answer registered:false on lookups by
// device and by key and on signature checks, the removing one at once and the
// other within core/agent.RemovalMaxAge, and the leaderboard counts drop. A
// stranger's page lists only their own agents and cannot remove another's.

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/pgtest"
	"github.com/palmgate/palmgate/internal/testserver"
)

// removalBound is core/agent.RemovalMaxAge: how stale another instance's
// registration caches may be.
const removalBound = 2 * time.Second

// registrationState is "" when e answers, for a, registered on the device and
// key lookups and the signature check as want says, or what differs.
func (e *env) registrationState(t *testing.T, a *agent, want bool) string {
	t.Helper()
	var diffs []string
	if l := e.lookupDevice(t, a.deviceID); l.Registered != want {
		diffs = append(diffs, fmt.Sprintf("device lookup registered=%v", l.Registered))
	}
	if l := e.lookupKey(t, a.urlKey()); l.Registered != want {
		diffs = append(diffs, fmt.Sprintf("key lookup registered=%v", l.Registered))
	}
	m := e.do(t, "POST", "/v1/agent/verify/signature", a.sign("still mine?", time.Now().UnixMilli())).ExpectStatus(t, http.StatusOK).Object(t)
	if m["verified"] != true || m["registered"] != want {
		diffs = append(diffs, fmt.Sprintf("signature check %v", m))
	}
	if len(diffs) == 0 {
		return ""
	}
	return fmt.Sprintf("%s (want registered=%v): %s", a.deviceID, want, strings.Join(diffs, "; "))
}

// agentsOf is "" when e's leaderboard shows humanID with n agents (0: absent).
func (e *env) agentsOf(t *testing.T, humanID string, n int) string {
	t.Helper()
	for _, x := range e.leaderboard(t, "?limit=1000") {
		if x.HumanID == humanID {
			if x.AgentCount != n {
				return fmt.Sprintf("%s has %d agents on the leaderboard, want %d", humanID, x.AgentCount, n)
			}
			return ""
		}
	}
	if n != 0 {
		return fmt.Sprintf("%s is not on the leaderboard, want %d agents", humanID, n)
	}
	return ""
}

// ownerPage is one browser's visit to e's agents page.
type ownerPage struct {
	e       *env
	browser *http.Client
	csrf    string
}

// openOwnerPage opens e's agents page in a new browser, completes its palm step
// with a dev scan as subject, and returns the verified page.
func (e *env) openOwnerPage(t *testing.T, subject string) *ownerPage {
	t.Helper()
	p := &ownerPage{e: e, browser: testserver.NewBrowser()}
	resp := p.get(t, "text/html").ExpectStatus(t, http.StatusOK)
	if !strings.Contains(string(resp.Body), "Simulate palm scan") || !qrImgRE.Match(resp.Body) {
		t.Fatalf("the agents page's palm step lacks the QR code or the dev scan:\n%s", testserver.Snippet(resp.Body))
	}
	var c challengeInfo
	p.get(t, "application/json").ExpectStatus(t, http.StatusOK).Decode(t, &c)
	if c.Status != "pending" || !uuidRE.MatchString(c.ChallengeID) || !nonceRE.MatchString(c.Nonce) {
		t.Fatalf("the agents page's JSON while pending: %+v", c)
	}
	if m := e.devScan(t, c, subject).ExpectStatus(t, http.StatusOK).Object(t); str(m["status"]) != "verified" {
		t.Fatalf("dev-scan of the agents page: %v", m)
	}
	resp = p.get(t, "text/html").ExpectStatus(t, http.StatusOK)
	m := csrfRE.FindSubmatch(resp.Body) // the portal's form field has the same shape
	if m == nil {
		t.Fatalf("the verified agents page has no CSRF field:\n%s", testserver.Snippet(resp.Body))
	}
	p.csrf = string(m[1])
	return p
}

func (p *ownerPage) get(t *testing.T, accept string) *testserver.Response {
	t.Helper()
	return testserver.DoWith(t, p.browser, "GET", p.e.URL+"/v1/human/agents", nil, "Accept", accept)
}

// listed returns the device ids the verified page lists (its JSON form).
func (p *ownerPage) listed(t *testing.T) []string {
	t.Helper()
	var j struct {
		Status string `json:"status"`
		Agents []struct {
			DeviceID     string `json:"deviceId"`
			RegisteredAt string `json:"registeredAt"`
		} `json:"agents"`
	}
	p.get(t, "application/json").ExpectStatus(t, http.StatusOK).Decode(t, &j)
	if j.Status != "verified" {
		t.Fatalf("the agents page's JSON: status %q, want verified", j.Status)
	}
	var ids []string
	for _, a := range j.Agents {
		if !timeRE.MatchString(a.RegisteredAt) {
			t.Errorf("listed agent %s: registeredAt %q", a.DeviceID, a.RegisteredAt)
		}
		ids = append(ids, a.DeviceID)
	}
	return ids
}

// remove posts the page's Remove form for deviceID with csrf.
func (p *ownerPage) remove(t *testing.T, deviceID, csrf string) *testserver.Response {
	t.Helper()
	form := url.Values{"csrf": {csrf}, "deviceId": {deviceID}}.Encode()
	return testserver.DoWith(t, p.browser, "POST", p.e.URL+"/v1/human/agents/remove", form, "Content-Type", "application/x-www-form-urlencoded")
}

func TestAgentRemovalAcrossInstances(t *testing.T) {
	t.Parallel()
	p := startPair(t, pgtest.NewCluster(t).DSN(t), nil, false)
	a, b := p.a, p.b
	alice, bob := a.subject("alice"), a.subject("bob")
	b.secrets = append(b.secrets, alice, bob)

	byOperator, byOwner, kept := newAgent(t, "removed-by-operator"), newAgent(t, "removed-by-owner"), newAgent(t, "kept-agent")
	alicesID := a.register(t, byOperator, alice).humanID
	a.register(t, byOwner, alice)
	a.register(t, kept, alice)
	bobs := newAgent(t, "bobs-agent")
	bobsID := a.register(t, bobs, bob).humanID // the helper checks URLs against the issuer: A
	// Both instances have seen every agent registered (their caches hold them).
	for _, e := range []*env{a, b} {
		for _, ag := range []*agent{byOperator, byOwner, kept, bobs} {
			if msg := e.registrationState(t, ag, true); msg != "" {
				t.Fatal(msg)
			}
		}
	}
	waitFor(t, "both leaderboards count alice's three agents", leaderboardMax+observeSlack, time.Now(), func() string {
		return a.agentsOf(t, alicesID, 3) + b.agentsOf(t, alicesID, 3)
	})

	// The operator removes one through A's admin API.
	out, err := a.RunCommand(t, "palmgate", "agent", "remove", byOperator.deviceID, "--address", a.AdminAddr)
	removedAt := time.Now()
	if err != nil || !strings.Contains(out, "removed agent "+byOperator.deviceID) {
		t.Fatalf("caddy palmgate agent remove: %v\n%s", err, out)
	}
	if msg := a.registrationState(t, byOperator, false); msg != "" {
		t.Errorf("at once on the removing instance: %s", msg)
	}
	waitFor(t, "B forgets the agent the operator removed at A", removalBound+observeSlack, removedAt, func() string {
		return b.registrationState(t, byOperator, false)
	})
	waitFor(t, "both leaderboards drop it", leaderboardMax+observeSlack, removedAt, func() string {
		return a.agentsOf(t, alicesID, 2) + b.agentsOf(t, alicesID, 2)
	})
	// Unknown and already removed: a plain one-line error and a failure exit.
	for _, id := range []string{byOperator.deviceID, "never-registered"} {
		out, err := b.RunCommand(t, "palmgate", "agent", "remove", id, "--address", b.AdminAddr)
		if want := "caddy palmgate agent remove: no agent with this deviceId is registered\n"; err == nil || out != want {
			t.Errorf("removing %s again: %v, %q, want the failure %q", id, err, out, want)
		}
	}

	// The admin route's refusals: a malformed deviceId 400, another method 405.
	admin := "http://" + a.AdminAddr + "/palmgate/agents/"
	testserver.Do(t, "DELETE", admin+"bad%01id", nil).ExpectStatus(t, http.StatusBadRequest)
	testserver.Do(t, "GET", admin+kept.deviceID, nil).ExpectStatus(t, http.StatusMethodNotAllowed)

	// A stranger (bob) opens the page at A: only his agent; he cannot remove
	// alice's, even with his own valid session and token.
	stranger := a.openOwnerPage(t, bob)
	if got := stranger.listed(t); len(got) != 1 || got[0] != bobs.deviceID {
		t.Errorf("bob's page lists %v, want only %s", got, bobs.deviceID)
	}
	stranger.remove(t, byOwner.deviceID, stranger.csrf).ExpectStatus(t, http.StatusNotFound)

	// Alice opens it at B and removes one of hers.
	owner := b.openOwnerPage(t, alice)
	if got := strings.Join(owner.listed(t), ","); got != byOwner.deviceID+","+kept.deviceID {
		t.Errorf("alice's page lists %s, want %s,%s", got, byOwner.deviceID, kept.deviceID)
	}
	// A forged post: bob's browser with alice's token (403), alice's browser with
	// bob's (403).
	stranger.remove(t, byOwner.deviceID, owner.csrf).ExpectStatus(t, http.StatusForbidden)
	owner.remove(t, byOwner.deviceID, stranger.csrf).ExpectStatus(t, http.StatusForbidden)
	if msg := b.registrationState(t, byOwner, true); msg != "" {
		t.Fatalf("a refused removal removed the agent: %s", msg)
	}

	resp := owner.remove(t, byOwner.deviceID, owner.csrf).ExpectStatus(t, http.StatusOK)
	removedAt = time.Now()
	if !strings.Contains(string(resp.Body), "Removed "+byOwner.deviceID) {
		t.Errorf("the page after the removal:\n%s", testserver.Snippet(resp.Body))
	}
	if msg := b.registrationState(t, byOwner, false); msg != "" {
		t.Errorf("at once on the removing instance: %s", msg)
	}
	waitFor(t, "A forgets the agent its owner removed at B", removalBound+observeSlack, removedAt, func() string {
		return a.registrationState(t, byOwner, false)
	})
	waitFor(t, "both leaderboards drop it", leaderboardMax+observeSlack, removedAt, func() string {
		return a.agentsOf(t, alicesID, 1) + b.agentsOf(t, alicesID, 1) + a.agentsOf(t, bobsID, 1)
	})
	for _, e := range []*env{a, b} {
		if msg := e.registrationState(t, kept, true) + e.registrationState(t, bobs, true); msg != "" {
			t.Errorf("an agent nobody removed: %s", msg)
		}
	}
	if got := owner.listed(t); len(got) != 1 || got[0] != kept.deviceID {
		t.Errorf("alice's page lists %v after the removal, want only %s", got, kept.deviceID)
	}
}
