package integration

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/palmgate/palmgate/internal/testserver"
)

// Parameters of TestCrashUnderLoad.
const (
	crashKills    = 20 // SIGKILLs of the server under load
	crashWorkers  = 4  // concurrent clients
	crashHumans   = 5  // palm subjects shared by all workers (contended leaderboard entries)
	crashLiveFams = 6  // refresh families each worker keeps refreshing
)

// TestCrashUnderLoad drives concurrent agent registrations, palm completions,
// logins, code exchanges and refresh-token rotations against the real server and
// SIGKILLs it 20 times at random moments (100-800 ms after each restart), each
// time restarting it on the same data directory and ports. A request is
// "answered" when its whole response was read; requests cut off by a kill are
// unanswered and their effect is unknown (either outcome is fine). Then it checks
// that every answered write is there and that the records agree:
//
//   - every answered init's session exists (never 404): pending when no scan was
//     sent, completed when the scan was answered 200, pending or completed when the
//     scan's answer was lost; never failed or expired;
//   - an agent is registered exactly when its session is completed; its device and
//     key lookups agree; every agent scanned by one palm subject belongs to one
//     human, and different subjects are different humans;
//   - the leaderboard's agentCount sum equals the registered agents, each human's
//     count equals its agents' lookups, and the store's record counts agree
//     (agent/d = agent/k = agent/ha = registered agents, agent/h = agent/lb = humans);
//   - every refresh family's latest answered refresh token still refreshes. The
//     one exception is a family with an unanswered refresh after its latest
//     answered one: that refresh may have been applied, which makes the recorded
//     token a rotated one whose use is reuse and revokes the family, so
//     invalid_grant is accepted there (and only there);
//   - no rotated-away token works: using one answers invalid_grant and revokes the
//     family, and the revocation survives one more crash; families revoked during
//     the run stay revoked.
//
// A transport error while the server was up and not being killed fails the test.
func TestCrashUnderLoad(t *testing.T) {
	t.Parallel()
	app := newOIDCClient("crash-app", "")
	e := startOIDC(t, []oidcClient{app})
	r := &crashRun{
		t: t, e: e, app: app,
		client: &http.Client{
			Jar:           newJar(),
			Timeout:       15 * time.Second,
			Transport:     &http.Transport{MaxIdleConnsPerHost: 2 * crashWorkers},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		stop: make(chan struct{}),
	}
	for i := range crashHumans {
		r.subjects = append(r.subjects, fmt.Sprintf("palm-subject-crash-%d-%s", i, randHex(4)))
	}

	var wg sync.WaitGroup
	var stopOnce sync.Once
	stopWorkers := func() {
		stopOnce.Do(func() { close(r.stop) })
		wg.Wait()
	}
	defer stopWorkers() // also when a restart fails the test
	for w := range crashWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.worker(w)
		}()
	}
	start := time.Now()
	interrupted := 0
	for range crashKills {
		time.Sleep(time.Duration(100+rand.IntN(701)) * time.Millisecond)
		before := r.unanswered.Load()
		r.epoch.Add(1) // odd: the server is going down; transport errors from here on are expected
		e.Kill()
		e.Restart(t)
		// Connections to the killed process are dead; a pooled one would make the
		// next request fail while the new process is up.
		r.client.Transport.(*http.Transport).CloseIdleConnections()
		r.epoch.Add(1) // even: up again
		if r.unanswered.Load() > before {
			interrupted++
		}
	}
	time.Sleep(300 * time.Millisecond) // some answered load on the last process too
	stopWorkers()
	t.Logf("%d kills in %s (%d cut off requests in flight); answered: %d inits, %d scans, %d code exchanges, %d refreshes; unanswered requests: %d",
		crashKills, time.Since(start).Round(time.Millisecond), interrupted, len(r.sessions), r.scans.Load(), len(r.families), r.refreshes.Load(), r.unanswered.Load())
	if t.Failed() {
		return
	}
	if len(r.sessions) < 20 || r.scans.Load() < 10 || len(r.families) < 10 || r.refreshes.Load() < 10 {
		t.Fatalf("too little answered load to check anything: %d inits, %d scans, %d families, %d refreshes",
			len(r.sessions), r.scans.Load(), len(r.families), r.refreshes.Load())
	}
	r.verifyRegistry()
	revoked := r.verifyFamilies()

	// The revocations the checks just caused are answered writes too.
	e.Kill()
	e.Restart(t)
	for _, f := range revoked {
		if resp := r.refreshOnce(f.latest); resp.Status != http.StatusBadRequest || oauthErrorCode(resp.Body) != "invalid_grant" {
			t.Errorf("family %s, revoked before a crash: its last token answers %d %s after the restart, want 400 invalid_grant", f.sid, resp.Status, testserver.Snippet(resp.Body))
		}
	}
}

// crashRun is the shared state of TestCrashUnderLoad.
type crashRun struct {
	t        *testing.T
	e        *env
	app      oidcClient
	client   *http.Client
	subjects []string
	stop     chan struct{}

	// epoch is even while the server is up and odd from just before a kill until
	// the restarted server answers.
	epoch atomic.Int64

	unanswered atomic.Int64
	scans      atomic.Int64 // answered 200 palm scans of registrations
	refreshes  atomic.Int64 // answered 200 refreshes

	mu       sync.Mutex
	sessions []*crashSession
	families []*crashFamily
}

// crashSession is a registration session whose init was answered 201.
type crashSession struct {
	id      string
	agent   *agent
	subject string // the palm subject of the scan, if one was sent
	scan    string // "" (none sent), "answered" (200) or "unanswered"
}

// crashFamily is a refresh family: a code exchange answered 200 and its rotations.
type crashFamily struct {
	sid     string
	latest  string   // the refresh token of the latest answered 200
	rotated []string // tokens rotated away by answered refreshes
	// uncertain: a refresh with latest went unanswered and none was answered since.
	uncertain bool
	// revoked: a refresh answered invalid_grant (allowed only when uncertain).
	revoked bool
}

// crashAnswer is a response read to its end.
type crashAnswer struct {
	status int
	header http.Header
	body   []byte
}

func (r *crashRun) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// send sends a request once the server is up. It returns nil when the request
// went unanswered because of a kill (or was not sent because the load stopped); a
// transport error at any other time fails the test (and also returns nil).
func (r *crashRun) send(method, u string, body []byte, contentType string, headers ...string) *crashAnswer {
	var epoch int64
	for epoch = r.epoch.Load(); epoch%2 == 1; epoch = r.epoch.Load() {
		if r.stopped() {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		r.t.Errorf("%s %s: %v", method, u, err)
		return nil
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := r.client.Do(req)
	var data []byte
	if err == nil {
		data, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err != nil {
		if r.epoch.Load() != epoch {
			r.unanswered.Add(1)
			return nil
		}
		r.t.Errorf("%s %s: transport error while the server was up: %v", method, u, err)
		return nil
	}
	return &crashAnswer{status: resp.StatusCode, header: resp.Header, body: data}
}

func (r *crashRun) postJSON(path string, v any) *crashAnswer {
	b, _ := json.Marshal(v)
	return r.send("POST", r.e.URL+path, b, "application/json")
}

func (r *crashRun) postForm(path string, form url.Values) *crashAnswer {
	return r.send("POST", r.e.URL+path, []byte(form.Encode()), "application/x-www-form-urlencoded")
}

// expect reports an answer with another status than want.
func (r *crashRun) expect(a *crashAnswer, what string, want int) bool {
	if a.status != want {
		r.t.Errorf("%s: status %d, want %d\nbody: %s", what, a.status, want, testserver.Snippet(a.body))
		return false
	}
	return true
}

func (r *crashRun) worker(w int) {
	var live []*crashFamily
	for i := 0; !r.stopped(); i++ {
		r.register(w, i)
		if f := r.loginFamily(); f != nil {
			live = append(live, f)
			if len(live) > crashLiveFams {
				live = live[1:]
			}
		}
		for range 2 {
			if len(live) > 0 && !r.stopped() {
				f := live[rand.IntN(len(live))]
				if !r.rotate(f) {
					live = slices.DeleteFunc(live, func(x *crashFamily) bool { return x == f })
				}
			}
		}
	}
}

// register opens a session for a new agent and completes it with a palm scan.
func (r *crashRun) register(w, i int) {
	a := newAgent(r.t, fmt.Sprintf("crash-agent-%d-%d", w, i))
	resp := r.postJSON("/v1/agent/register/init", a.registration(time.Now()))
	if resp == nil || !r.expect(resp, "init", http.StatusCreated) {
		return
	}
	var m struct{ SessionID string }
	if err := json.Unmarshal(resp.body, &m); err != nil || !uuidRE.MatchString(m.SessionID) {
		r.t.Errorf("init: body %s", resp.body)
		return
	}
	s := &crashSession{id: m.SessionID, agent: a}
	r.mu.Lock()
	r.sessions = append(r.sessions, s)
	r.mu.Unlock()

	resp = r.send("GET", r.e.URL+"/v1/agent/register/"+s.id+"/verify", nil, "", "User-Agent", testserver.PhoneUserAgent)
	if resp == nil || !r.expect(resp, "registration page "+s.id, http.StatusOK) {
		return
	}
	c, ok := parseScanURL(testserver.AppLink(resp.body))
	if !ok {
		r.t.Errorf("registration page %s: %s, want a pending challenge with an app link", s.id, testserver.Snippet(resp.body))
		return
	}
	subject := r.subjects[rand.IntN(len(r.subjects))]
	r.mu.Lock()
	s.subject, s.scan = subject, "unanswered"
	r.mu.Unlock()
	resp = r.postJSON("/v1/palm/challenges/"+c.ChallengeID+"/dev-scan", map[string]string{"nonce": c.Nonce, "palmSubject": subject})
	if resp == nil || !r.expect(resp, "dev-scan of session "+s.id, http.StatusOK) {
		return
	}
	r.mu.Lock()
	s.scan = "answered"
	r.mu.Unlock()
	r.scans.Add(1)
}

// loginFamily logs a person in (authorize, scan, code, exchange) and returns the
// refresh family, or nil when a step went unanswered.
func (r *crashRun) loginFamily() *crashFamily {
	verifier := oauth2.GenerateVerifier()
	resp := r.send("GET", r.e.authURL(r.app, "code_challenge", oauth2.S256ChallengeFromVerifier(verifier), "code_challenge_method", "S256"), nil, "")
	if resp == nil || !r.expect(resp, "authorize", http.StatusFound) {
		return nil
	}
	page := resp.header.Get("Location")
	if !strings.HasPrefix(page, r.e.URL+"/oauth2/verify?auth_request_id=") {
		r.t.Errorf("authorize: Location %q", page)
		return nil
	}
	if resp = r.send("GET", page, nil, "", "Accept", "application/json"); resp == nil || !r.expect(resp, "login page", http.StatusOK) {
		return nil
	}
	var p loginPage
	if err := json.Unmarshal(resp.body, &p); err != nil || p.Status != "pending" {
		r.t.Errorf("login page: %s, want a pending challenge", resp.body)
		return nil
	}
	resp = r.postJSON("/v1/palm/challenges/"+p.ChallengeID+"/dev-scan", map[string]string{"nonce": p.Nonce, "palmSubject": r.subjects[rand.IntN(len(r.subjects))]})
	if resp == nil || !r.expect(resp, "dev-scan of a login", http.StatusOK) {
		return nil
	}
	if resp = r.send("GET", page, nil, ""); resp == nil || !r.expect(resp, "login page after the scan", http.StatusFound) {
		return nil
	}
	cb, err := url.Parse(resp.header.Get("Location"))
	if err != nil || cb.Query().Get("code") == "" {
		r.t.Errorf("login page after the scan: Location %q, want a code", resp.header.Get("Location"))
		return nil
	}
	resp = r.postForm("/oauth2/token", url.Values{"grant_type": {"authorization_code"}, "code": {cb.Query().Get("code")},
		"redirect_uri": {r.app.redirects[0]}, "client_id": {r.app.id}, "client_secret": {r.app.secret}, "code_verifier": {verifier}})
	if resp == nil || !r.expect(resp, "code exchange", http.StatusOK) {
		return nil
	}
	rt := refreshTokenOf(resp.body)
	sid := tokenSID(rt)
	if sid == "" {
		r.t.Errorf("code exchange: no refresh token with a sid in %s", testserver.Snippet(resp.body))
		return nil
	}
	f := &crashFamily{sid: sid, latest: rt}
	r.mu.Lock()
	r.families = append(r.families, f)
	r.mu.Unlock()
	return f
}

// rotate refreshes a family once; it returns false once the family is revoked.
func (r *crashRun) rotate(f *crashFamily) bool {
	resp := r.postForm("/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {f.latest},
		"client_id": {r.app.id}, "client_secret": {r.app.secret}})
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case resp == nil:
		f.uncertain = true
		return true
	case resp.status == http.StatusOK:
		rt := refreshTokenOf(resp.body)
		if got := tokenSID(rt); got != f.sid {
			r.t.Errorf("refresh of family %s: new refresh token has sid %q", f.sid, got)
			return false
		}
		f.rotated = append(f.rotated, f.latest)
		f.latest, f.uncertain = rt, false
		r.refreshes.Add(1)
		return true
	case resp.status == http.StatusBadRequest && oauthErrorCode(resp.body) == "invalid_grant" && f.uncertain:
		// The unanswered refresh was applied: f.latest had been rotated away, and
		// using it again revoked the family, as it must.
		f.revoked = true
		return false
	default:
		r.t.Errorf("refresh of family %s with its latest answered token (uncertain %v): status %d %s, want 200",
			f.sid, f.uncertain, resp.status, testserver.Snippet(resp.body))
		f.revoked = true
		return false
	}
}

// refreshOnce refreshes with token through the test's own helpers (the server
// is stable by now: transport errors fail the test).
func (r *crashRun) refreshOnce(token string) *testserver.Response {
	return r.e.postToken(r.t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {token},
		"client_id": {r.app.id}, "client_secret": {r.app.secret}})
}

// verifyRegistry checks sessions, agents, humans, the leaderboard and the store's
// record counts against what was answered.
func (r *crashRun) verifyRegistry() {
	t, e := r.t, r.e
	registered := 0
	humanOf := map[string]string{}   // palm subject -> humanId
	subjectOf := map[string]string{} // humanId -> palm subject
	agentsOf := map[string]int{}     // humanId -> registered agents
	for _, s := range r.sessions {
		resp := e.do(t, "GET", "/v1/agent/register/"+s.id+"/status", nil)
		if resp.Status != http.StatusOK {
			t.Errorf("session %s (init answered 201, scan %q): status endpoint answers %d %s", s.id, s.scan, resp.Status, testserver.Snippet(resp.Body))
			continue
		}
		st := str(resp.Object(t)["status"])
		allowed := map[string][]string{"": {"pending"}, "unanswered": {"pending", "completed"}, "answered": {"completed"}}[s.scan]
		if !slices.Contains(allowed, st) {
			t.Errorf("session %s (scan %q): status %q, want one of %v", s.id, s.scan, st, allowed)
		}
		byDevice := e.lookupDevice(t, s.agent.deviceID)
		if byKey := e.lookupKey(t, s.agent.urlKey()); byKey != byDevice {
			t.Errorf("agent %s: key lookup %+v, device lookup %+v", s.agent.deviceID, byKey, byDevice)
		}
		if byDevice.Registered != (st == "completed") {
			t.Errorf("agent %s: registered %v, but its session is %q", s.agent.deviceID, byDevice.Registered, st)
		}
		if !byDevice.Registered {
			continue
		}
		registered++
		agentsOf[byDevice.HumanID]++
		if h, ok := humanOf[s.subject]; ok && h != byDevice.HumanID {
			t.Errorf("palm subject %d has two humans: %s and %s", slices.Index(r.subjects, s.subject), h, byDevice.HumanID)
		}
		if p, ok := subjectOf[byDevice.HumanID]; ok && p != s.subject {
			t.Errorf("human %s was scanned as two palm subjects", byDevice.HumanID)
		}
		humanOf[s.subject], subjectOf[byDevice.HumanID] = byDevice.HumanID, s.subject
	}

	board := e.leaderboard(t, "?limit=1000")
	if got := totalAgents(board); got != registered {
		t.Errorf("leaderboard counts %d agents, lookups find %d registered", got, registered)
	}
	if len(board) != len(agentsOf) {
		t.Errorf("leaderboard lists %d humans, lookups find %d humans with agents", len(board), len(agentsOf))
	}
	for _, x := range board {
		if x.AgentCount != agentsOf[x.HumanID] {
			t.Errorf("leaderboard: human %s has agentCount %d, lookups find %d agents", x.HumanID, x.AgentCount, agentsOf[x.HumanID])
		}
	}

	counts := r.stats()
	for kind, want := range map[string]int{"agent/d": registered, "agent/k": registered, "agent/ha": registered, "agent/h": len(agentsOf), "agent/lb": len(agentsOf)} {
		if counts[kind] != want {
			t.Errorf("store: %d %s records, want %d (stats %v)", counts[kind], kind, want, counts)
		}
	}
	t.Logf("%d answered sessions, %d registered agents of %d humans", len(r.sessions), registered, len(agentsOf))
}

// stats reads the record counts of the admin API.
func (r *crashRun) stats() map[string]int {
	resp := testserver.Do(r.t, "GET", "http://"+r.e.AdminAddr+"/palmgate/stats", nil).ExpectStatus(r.t, http.StatusOK)
	var st struct {
		Records map[string]int `json:"records"`
	}
	resp.Decode(r.t, &st)
	return st.Records
}

// verifyFamilies checks every refresh family and returns those it revoked.
func (r *crashRun) verifyFamilies() []*crashFamily {
	t := r.t
	var revoked []*crashFamily
	alive, stale, rotatedChecked := 0, 0, 0
	for _, f := range r.families {
		if f.revoked {
			// Revoked during the run (reuse after a lost answer): it stays revoked.
			if resp := r.refreshOnce(f.latest); resp.Status != http.StatusBadRequest || oauthErrorCode(resp.Body) != "invalid_grant" {
				t.Errorf("family %s was revoked during the run, but its last token answers %d %s", f.sid, resp.Status, testserver.Snippet(resp.Body))
			}
			continue
		}
		resp := r.refreshOnce(f.latest)
		switch {
		case resp.Status == http.StatusOK:
			alive++
		case f.uncertain && resp.Status == http.StatusBadRequest && oauthErrorCode(resp.Body) == "invalid_grant":
			stale++ // the lost refresh was applied: this was reuse, and revoked the family
			continue
		default:
			t.Errorf("family %s: the latest answered refresh token (after %d answered rotations, uncertain %v) answers %d %s, want 200",
				f.sid, len(f.rotated), f.uncertain, resp.Status, testserver.Snippet(resp.Body))
			continue
		}
		var tok struct {
			RefreshToken string `json:"refresh_token"`
		}
		resp.Decode(t, &tok)
		if got := tokenSID(tok.RefreshToken); got != f.sid {
			t.Errorf("family %s: refreshed token has sid %q", f.sid, got)
		}
		// Any token rotated away, the one just used included, must fail and revoke
		// the family, whose newest token then fails too.
		old := append(f.rotated, f.latest)[rand.IntN(len(f.rotated)+1)]
		rotatedChecked++
		if resp := r.refreshOnce(old); resp.Status != http.StatusBadRequest || oauthErrorCode(resp.Body) != "invalid_grant" {
			t.Errorf("family %s: a rotated-away refresh token answers %d %s, want 400 invalid_grant", f.sid, resp.Status, testserver.Snippet(resp.Body))
		}
		f.latest = tok.RefreshToken
		if resp := r.refreshOnce(f.latest); resp.Status != http.StatusBadRequest || oauthErrorCode(resp.Body) != "invalid_grant" {
			t.Errorf("family %s: after reuse of a rotated token, the newest token answers %d %s, want 400 invalid_grant (family revoked)", f.sid, resp.Status, testserver.Snippet(resp.Body))
		}
		revoked = append(revoked, f)
	}
	t.Logf("%d refresh families: %d alive, %d revoked by reuse after a lost answer (%d during the run), %d rotated-away tokens refused",
		len(r.families), alive, stale, countRevoked(r.families), rotatedChecked)
	return revoked
}

func countRevoked(fs []*crashFamily) int {
	n := 0
	for _, f := range fs {
		if f.revoked {
			n++
		}
	}
	return n
}

// refreshTokenOf returns the refresh_token of a token response body.
func refreshTokenOf(body []byte) string {
	var tok struct {
		RefreshToken string `json:"refresh_token"`
	}
	_ = json.Unmarshal(body, &tok)
	return tok.RefreshToken
}

// tokenSID returns the sid claim of a JWT, or "".
func tokenSID(token string) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var c struct {
		SID string `json:"sid"`
	}
	if json.Unmarshal(b, &c) != nil {
		return ""
	}
	return c.SID
}

// oauthErrorCode returns the "error" of an RFC 6749 error body, or "".
func oauthErrorCode(body []byte) string {
	var m struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return ""
	}
	return m.Error
}
