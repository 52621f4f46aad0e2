package integration

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
)

// TestRegistrationRace opens 16 sessions for one device and completes them all
// at once: exactly one wins. Then 16 scans race for a single challenge: exactly
// one completes it.
func TestRegistrationRace(t *testing.T) {
	t.Parallel()
	e := start(t, testserver.Options{Global: "rate_limit off"})
	const n = 16

	a := newAgent(t, "contested-device")
	var sessions []session
	var infos []challengeInfo
	for range n {
		s := e.initSession(t, a.registration(time.Now())) // same device and key, distinct messages
		sessions = append(sessions, s)
		infos = append(infos, e.verifyInfo(t, s))
	}
	scans := make([]*testserver.Response, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			scans[i] = e.devScan(t, infos[i], e.subject(fmt.Sprint("racer", i)))
		}()
	}
	close(gate)
	wg.Wait()
	for i, r := range scans {
		if r == nil || r.Status != http.StatusOK {
			t.Errorf("dev-scan of session %d: %+v, want 200 (each palm challenge is verified once)", i, r)
		}
	}
	completed, failed := 0, 0
	var winner map[string]any
	for _, s := range sessions {
		st := e.status(t, s.ID)
		switch str(st["status"]) {
		case "completed":
			completed++
			winner = st
		case "failed":
			failed++
			if _, ok := st["registration"]; ok {
				t.Errorf("failed session %s carries a registration: %v", s.ID, st)
			}
		default:
			t.Errorf("session %s: %v, want completed or failed", s.ID, st)
		}
	}
	if completed != 1 || failed != n-1 {
		t.Fatalf("%d completed and %d failed sessions, want 1 and %d", completed, failed, n-1)
	}
	reg, _ := winner["registration"].(map[string]any)
	l := e.lookupDevice(t, a.deviceID)
	if !l.Registered || l.RegisteredAt != str(reg["registeredAt"]) {
		t.Errorf("device lookup %+v, want the winner's registration %v", l, reg)
	}
	if k := e.lookupKey(t, url.PathEscape(a.pub)); k != l {
		t.Errorf("key lookup %+v, device lookup %+v", k, l)
	}
	lb := e.leaderboard(t, "")
	if len(lb) != 1 || lb[0].HumanID != l.HumanID || lb[0].AgentCount != 1 {
		t.Errorf("leaderboard %+v, want one human %s with one agent", lb, l.HumanID)
	}
	e.do(t, "POST", "/v1/agent/register/init", a.registration(time.Now())).ExpectError(t, http.StatusConflict, "already_registered", "")

	t.Run("one challenge, 16 scans", func(t *testing.T) {
		b := newAgent(t, "single-challenge")
		s := e.initSession(t, b.registration(time.Now()))
		c := e.verifyInfo(t, s)
		codes := make([]int, n)
		gate := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				codes[i] = e.devScan(t, c, e.subject(fmt.Sprint("scanner", i))).Status
			}()
		}
		close(gate)
		wg.Wait()
		counts := map[int]int{}
		for _, c := range codes {
			counts[c]++
		}
		if counts[http.StatusOK] != 1 || counts[http.StatusConflict] != n-1 {
			t.Errorf("scan statuses %v, want one 200 and %d 409", counts, n-1)
		}
		if st := e.status(t, s.ID); str(st["status"]) != "completed" {
			t.Errorf("session %v, want completed", st)
		}
		lb := e.leaderboard(t, "")
		if totalAgents(lb) != 2 {
			t.Errorf("leaderboard %+v counts %d agents, want 2", lb, totalAgents(lb))
		}
	})
}

// TestSessionExpiry checks that an expired session stays readable as expired and
// that its challenge can no longer be completed.
func TestSessionExpiry(t *testing.T) {
	t.Parallel()
	// Long enough for the three requests before the wait to see the session
	// pending on a loaded machine; the wait is until the expiry the server set.
	const ttl = 10 * time.Second
	e := start(t, testserver.Options{Global: fmt.Sprintf("registration_session_ttl %s", ttl)})
	a := newAgent(t, "slow-owner")
	before := time.Now()
	s := e.initSession(t, a.registration(time.Now()))
	expires := parseTime(t, s.ExpiresAt)
	between(t, "expiresAt with registration_session_ttl 10s", expires, before.Add(ttl), time.Now().Add(ttl), time.Millisecond)
	c := e.verifyInfo(t, s)
	if st := e.status(t, s.ID); str(st["status"]) != "pending" || c.Status != "pending" {
		t.Fatalf("status right after init: %v, page %q; want pending (expiresAt %s)", st, c.Status, s.ExpiresAt)
	}

	time.Sleep(time.Until(expires.Add(100 * time.Millisecond)))
	st := e.status(t, s.ID)
	if str(st["status"]) != "expired" {
		t.Errorf("status after expiresAt %s: %v, want expired", s.ExpiresAt, st)
	}
	if _, ok := st["deviceId"]; ok {
		t.Errorf("expired status carries deviceId: %v", st)
	}
	if got := e.verifyInfo(t, s).Status; got != "expired" {
		t.Errorf("verify page status %q, want expired", got)
	}
	if got := e.challengeStatus(t, c); got != "expired" {
		t.Errorf("palm challenge status %q, want expired", got)
	}
	resp := e.devScan(t, c, e.subject("late"))
	if resp.Status != http.StatusGone {
		t.Errorf("dev-scan of an expired challenge: status %d, want 410\nbody: %s", resp.Status, resp.Body)
	}
	if st := e.status(t, s.ID); str(st["status"]) != "expired" {
		t.Errorf("status after the late scan: %v, want expired", st)
	}
	e.expectUnregistered(t, a)
	if lb := e.leaderboard(t, ""); len(lb) != 0 {
		t.Errorf("leaderboard %+v, want empty", lb)
	}

	// The device is free to try again.
	r := e.register(t, a, e.subject("prompt"))
	if lb := e.leaderboard(t, ""); len(lb) != 1 || lb[0].HumanID != r.humanID {
		t.Errorf("leaderboard %+v, want only %s", lb, r.humanID)
	}
}

// TestChallengeMaxAge checks that challenge_max_age sets the accepted age of
// registration timestamps, in both directions.
func TestChallengeMaxAge(t *testing.T) {
	t.Parallel()
	e := start(t, testserver.Options{Global: "challenge_max_age 1m"})
	for _, d := range []time.Duration{-90 * time.Second, 90 * time.Second} {
		a := newAgent(t, fmt.Sprint("stale", d))
		e.do(t, "POST", "/v1/agent/register/init", a.registration(time.Now().Add(d))).
			ExpectError(t, http.StatusBadRequest, "timestamp_out_of_window", "timestamp")
	}
	for _, d := range []time.Duration{-30 * time.Second, 30 * time.Second} {
		e.initSession(t, newAgent(t, fmt.Sprint("fresh", d)).registration(time.Now().Add(d)))
	}
}

// TestSameKeyTwoDevices opens sessions for two devices with one key: the first
// completed registration takes the key, the second session fails.
func TestSameKeyTwoDevices(t *testing.T) {
	t.Parallel()
	e := start(t, testserver.Options{})
	first := newAgent(t, "twin-1")
	second := *first
	second.deviceID = "twin-2"
	s1 := e.initSession(t, first.registration(time.Now()))
	s2 := e.initSession(t, second.registration(time.Now()))
	c1, c2 := e.verifyInfo(t, s1), e.verifyInfo(t, s2)
	e.devScan(t, c1, e.subject("twin-owner-1")).ExpectStatus(t, http.StatusOK)
	e.devScan(t, c2, e.subject("twin-owner-2"))
	if st := e.status(t, s1.ID); str(st["status"]) != "completed" {
		t.Errorf("first session %v, want completed", st)
	}
	if st := e.status(t, s2.ID); str(st["status"]) != "failed" {
		t.Errorf("second session, same public key: %v, want failed (the key is registered to %q)", st, first.deviceID)
	}
	if l := e.lookupDevice(t, second.deviceID); l.Registered {
		t.Errorf("the second device is registered with a key already taken: %+v", l)
	}
	byKey, byDevice := e.lookupKey(t, first.urlKey()), e.lookupDevice(t, first.deviceID)
	if byKey != byDevice {
		t.Errorf("key lookup %+v, want the first device's registration %+v", byKey, byDevice)
	}
	if lb := e.leaderboard(t, ""); totalAgents(lb) != 1 {
		t.Errorf("leaderboard %+v counts %d agents, want 1", lb, totalAgents(lb))
	}
}

// snapshot is everything a client can read about some agents and sessions.
type snapshot struct {
	devices, keys []lookup
	statuses      []string
	board         []entry
}

func (e *env) snapshot(t *testing.T, agents []*agent, sessions []session) snapshot {
	t.Helper()
	var s snapshot
	for _, a := range agents {
		s.devices = append(s.devices, e.lookupDevice(t, a.deviceID))
		s.keys = append(s.keys, e.lookupKey(t, a.urlKey()))
	}
	for _, x := range sessions {
		s.statuses = append(s.statuses, fmt.Sprint(e.status(t, x.ID)))
	}
	s.board = e.leaderboard(t, "")
	return s
}

func (s snapshot) diff(o snapshot) string {
	var d []string
	for _, f := range []struct {
		name string
		a, b any
	}{{"device lookups", s.devices, o.devices}, {"key lookups", s.keys, o.keys}, {"session statuses", s.statuses, o.statuses}, {"leaderboard", s.board, o.board}} {
		if fmt.Sprintf("%+v", f.a) != fmt.Sprintf("%+v", f.b) {
			d = append(d, fmt.Sprintf("%s:\n  before %+v\n  after  %+v", f.name, f.a, f.b))
		}
	}
	return strings.Join(d, "\n")
}

// TestRestartPersistence restarts the server on its data directory: agents,
// humans, sessions, the leaderboard and replay protection survive.
func TestRestartPersistence(t *testing.T) {
	t.Parallel()
	e := start(t, testserver.Options{})
	alice, bob := e.subject("alice"), e.subject("bob")
	var agents []*agent
	var sessions []session
	var aliceHuman string
	for i, who := range []string{alice, alice, bob} {
		a := newAgent(t, fmt.Sprint("persistent-", i))
		r := e.register(t, a, who)
		if who == alice {
			aliceHuman = r.humanID
		}
		agents = append(agents, a)
		sessions = append(sessions, r.session)
	}
	p := newAgent(t, "pending-over-restart")
	pendingBody := p.registration(time.Now())
	ps := e.initSession(t, pendingBody)
	pc := e.verifyInfo(t, ps)
	before := e.snapshot(t, agents, append(sessions, ps))

	e.Restart(t)
	after := e.snapshot(t, agents, append(sessions, ps))
	if d := before.diff(after); d != "" {
		t.Errorf("state changed across a restart:\n%s", d)
	}
	e.do(t, "POST", "/v1/agent/register/init", pendingBody).ExpectError(t, http.StatusBadRequest, "challenge_replayed", "")
	if c := e.verifyInfo(t, ps); c.ChallengeID != pc.ChallengeID || c.Nonce != pc.Nonce || c.Status != "pending" {
		t.Errorf("pending challenge after restart: %+v, want %+v", c, pc)
	}
	e.devScan(t, pc, alice).ExpectStatus(t, http.StatusOK)
	if l := e.lookupDevice(t, p.deviceID); !l.Registered || l.HumanID != aliceHuman {
		t.Errorf("agent completed after restart: %+v, want registered to alice's human %s", l, aliceHuman)
	}
	if lb := e.leaderboard(t, ""); len(lb) != 2 || lb[0].HumanID != aliceHuman || lb[0].AgentCount != 3 || totalAgents(lb) != 4 {
		t.Errorf("leaderboard after restart and one more agent: %+v, want alice's human with 3 then bob's with 1", lb)
	}
}

// TestCrashPersistence kills the server with SIGKILL: what was answered is kept.
func TestCrashPersistence(t *testing.T) {
	t.Parallel()
	e := start(t, testserver.Options{})
	a := newAgent(t, "crash-survivor")
	r := e.register(t, a, e.subject("survivor"))
	p := newAgent(t, "crash-pending")
	ps := e.initSession(t, p.registration(time.Now()))
	before := e.snapshot(t, []*agent{a, p}, []session{r.session, ps})

	e.Kill()
	e.Restart(t)
	if d := before.diff(e.snapshot(t, []*agent{a, p}, []session{r.session, ps})); d != "" {
		t.Errorf("state changed across a crash:\n%s", d)
	}
}

// TestReload reloads the configuration through the admin API: no request fails
// meanwhile, the data stays and the new options apply; a refused reload keeps
// the running configuration.
func TestReload(t *testing.T) {
	t.Parallel()
	e := start(t, testserver.Options{Global: "registration_session_ttl 15m"})
	a := newAgent(t, "reload-agent")
	r := e.register(t, a, e.subject("reloader"))
	p := newAgent(t, "reload-pending")
	ps := e.initSession(t, p.registration(time.Now()))
	pc := e.verifyInfo(t, ps)
	before := e.snapshot(t, []*agent{a}, []session{r.session})

	// Caddy itself (v2.11.9, even with a bare `respond` site) drops about one
	// connection per reload with an EOF or a reset while it swaps servers: a
	// transport error is retried once, as clients do; any answer but 200 fails.
	poller := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func() (*http.Response, error) {
		resp, err := poller.Get(e.URL + "/v1/agent/verify/device/" + a.deviceID)
		if err != nil {
			resp, err = poller.Get(e.URL + "/v1/agent/verify/device/" + a.deviceID)
		}
		return resp, err
	}
	var polls, failures atomic.Int64
	var lastFailure atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			polls.Add(1)
			resp, err := get()
			if err != nil {
				failures.Add(1)
				lastFailure.Store(err.Error())
				continue
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				failures.Add(1)
				lastFailure.Store(resp.Status)
			}
		}
	}()
	e.Reload(t, "registration_session_ttl 3m")
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	if f := failures.Load(); f > 0 || polls.Load() == 0 {
		t.Errorf("%d of %d requests during the reload failed (last: %v)", f, polls.Load(), lastFailure.Load())
	}

	if d := before.diff(e.snapshot(t, []*agent{a}, []session{r.session})); d != "" {
		t.Errorf("state changed across a reload:\n%s", d)
	}
	now := time.Now()
	s := e.initSession(t, newAgent(t, "after-reload").registration(now))
	between(t, "expiresAt after reloading with registration_session_ttl 3m", parseTime(t, s.ExpiresAt), now.Add(3*time.Minute), time.Now().Add(3*time.Minute), time.Millisecond)
	e.devScan(t, pc, e.subject("finisher")).ExpectStatus(t, http.StatusOK)
	if st := e.status(t, ps.ID); str(st["status"]) != "completed" {
		t.Errorf("session opened before the reload and completed after it: %v, want completed", st)
	}

	t.Run("refused reload keeps the running configuration", func(t *testing.T) {
		out, err := e.TryReload(t, "registration_session_ttl banana")
		if err == nil {
			t.Fatalf("reload with registration_session_ttl banana succeeded:\n%s", out)
		}
		if !strings.Contains(out, "registration_session_ttl") {
			t.Errorf("reload error does not name registration_session_ttl:\n%s", out)
		}
		if e.Exited() {
			t.Fatalf("the server exited after a refused reload")
		}
		if l := e.lookupDevice(t, a.deviceID); !l.Registered {
			t.Errorf("lookup after a refused reload: %+v", l)
		}
		now := time.Now()
		s := e.initSession(t, newAgent(t, "after-refused-reload").registration(now))
		between(t, "expiresAt after a refused reload (still 3m)", parseTime(t, s.ExpiresAt), now.Add(3*time.Minute), time.Now().Add(3*time.Minute), time.Millisecond)
	})
}

// TestConfigErrors checks that invalid configurations stop the server at start
// with a message naming what is wrong.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	ed := newEd25519Attestor(t, "engine")
	for _, tc := range []struct {
		name   string
		opts   testserver.Options
		expect string
	}{
		{"neither dev nor palm_attestor", testserver.Options{NoDev: true}, "palm_attestor"},
		{"registration_session_ttl banana", testserver.Options{Global: "registration_session_ttl banana"}, "registration_session_ttl"},
		{"challenge_max_age banana", testserver.Options{Global: "challenge_max_age banana"}, "challenge_max_age"},
		{"palm_attestor key not base64", testserver.Options{NoDev: true, Global: "palm_attestor engine not*base64"}, "palm_attestor"},
		{"palm_attestor without a key", testserver.Options{NoDev: true, Global: "palm_attestor engine"}, "palm_attestor"},
		{"palm_attestor twice with one name", testserver.Options{Global: ed.config() + "\n" + ed.config()}, "engine"},
		{"rate_limit banana", testserver.Options{Global: "rate_limit banana 1m"}, "rate_limit"},
		{"unknown option", testserver.Options{Global: "frobnicate yes"}, "frobnicate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := testserver.StartExpectFailure(t, tc.opts)
			if !strings.Contains(out, tc.expect) {
				t.Errorf("output does not mention %q:\n%s", tc.expect, out)
			}
		})
	}
}
