package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/palmgate/palmgate/internal/testserver"
)

// Parameters of TestReloadUnderLoad.
const (
	reloadCount = 10
	// reloadGrace is how long after `caddy reload` returns a new connection may
	// still have been accepted (or queued) by the old server: `caddy reload`
	// returns once the old servers' Shutdown goroutines have started, not when they
	// have closed their listeners, and on a busy machine drops were seen up to
	// about 1 s later. Reloads are reloadGap apart, so that a new connection
	// dropped between two windows fails the test.
	reloadGrace = 2 * time.Second
	reloadGap   = 2500 * time.Millisecond
	// generationHeader names the config generation that answered a response.
	generationHeader = "Palmgate-Test-Generation"
)

// reloadCaddyfile is the test's Caddyfile: dev palmgate with one OIDC client,
// serving HTTP/1.1 and HTTP/2 over cleartext (h2c) on one port; every response
// names the config generation gen that served it.
func reloadCaddyfile(app oidcClient, sessionTTL string, gen int) string {
	return `{
	admin 127.0.0.1:{adminport}
	persist_config off
	servers {
		protocols h1 h2c
	}
	palmgate {
		issuer http://127.0.0.1:{port}
		storage badger {datadir}/palmgate
		dev
		rate_limit off
		registration_session_ttl ` + sessionTTL + `
		` + strings.ReplaceAll(strings.TrimSpace(app.config()), "\n", "\n\t\t") + `
	}
}

http://127.0.0.1:{port} {
	header ` + generationHeader + ` ` + strconv.Itoa(gen) + `
	palmgate
}
`
}

// TestReloadUnderLoad runs registrations, palm completions, status polls,
// lookups, leaderboard reads, logins, code exchanges, refreshes and userinfo
// calls from five concurrent clients while the configuration is reloaded 10 times
// (`caddy reload`, registration_session_ttl alternating between 16m and 15m,
// each checked to apply). Every request must get its intended status: any other
// answer fails the test.
//
// What the clients see, and what this test allows. On reload, Caddy v2.11.9
// starts the new servers on new SO_REUSEPORT sockets and Shutdown()s the old
// net/http servers. That drops a few HTTP/1.1 requests, always before any
// handler runs, in three ways (measured with a bare `respond` site as well, so
// none of it is palmgate's):
//
//  1. Shutdown closes idle keep-alive connections; a request the client is
//     writing on one at that moment gets EOF or "connection reset" (the close
//     with unread data sends an RST). net/http's Transport itself resends it on a
//     new connection when it is replayable (Request.isReplayable: GET, HEAD,
//     OPTIONS, TRACE, or a request with an Idempotency-Key or X-Idempotency-Key
//     header, whose body can be re-read); other requests get the error.
//  2. A connection accepted just before Shutdown: net/http's conn.serve reads
//     the request, sees the server shutting down and closes the connection
//     without calling the handler (server.go: "if c.server.shuttingDown()
//     { return }"): EOF on a fresh connection, which net/http never retries.
//  3. Connections queued on the old socket when it closes are reset by the kernel
//     (SO_REUSEPORT; Linux migrates them only with net.ipv4.tcp_migrate_req=1).
//     No server ever accepted them.
//
// HTTP/2 has no such race: the old server sends GOAWAY with the last stream it
// will process, and the client resends the later streams on a new connection,
// POSTs included, because the protocol guarantees they were not processed. Over
// HTTPS, Caddy's default, browsers and Go clients speak HTTP/2. So:
//
//   - Two workers speak HTTP/2 (h2c, prior knowledge). No request may fail; the
//     test never retries on their behalf.
//   - Three workers speak HTTP/1.1, two with keep-alive and one without, as the
//     plain-HTTP development setup and HTTP/1.1 proxies do. A transport error
//     before any byte of a response is the handover above when it happened on a
//     connection an older config generation served (every response names its
//     generation in a header), or on a new connection within reloadGrace of a
//     reload: the request never reached palmgate. The RSTs of 1 (a close with the
//     request unread) and 3 (a connection never accepted) are treated like the
//     EOFs: in all three the server closed the connection without reading the
//     request into a handler. If the request is replayable as net/http
//     defines it (here: the GETs; no request carries an Idempotency-Key), the
//     test retries it, as a client may, and the retry must get the intended
//     status. (net/http may already have resent it once on its own after a
//     failure on a reused connection; that happens inside Client.Do, as in every
//     Go program.) A non-replayable POST is not retried as load: a real client
//     gets the error. The test then sends the identical request again only to
//     prove the server never processed the first. A retry or resend dropped the
//     same way within a reload window (a loaded machine stretches the windows) is
//     sent again, at most three sends in all. Palmgate answers a repeated
//     init 400 challenge_replayed, a repeated scan 409, a repeated code exchange
//     or refresh 400 invalid_grant (revoking the tokens), so getting the intended
//     status proves that no answer was lost; anything else fails the test. These
//     drops are counted and logged, not failed: the server, not palmgate, dropped
//     them, and no HTTP/1.1 client can avoid them with Caddy v2.11.9.
//   - Any other transport error (HTTP/2, a response cut after its first byte, a
//     connection of the current generation, a new connection outside the reload
//     windows) fails the test.
//
// Finally every agent registered during the reloads is registered, the
// leaderboard counts them, and every refresh family's latest token refreshes.
func TestReloadUnderLoad(t *testing.T) {
	t.Parallel()
	app := newOIDCClient("reload-app", "")
	srv := testserver.Start(t, testserver.Options{Caddyfile: reloadCaddyfile(app, "15m", 0)})
	e := &env{Server: srv}
	r := &reloadRun{t: t, e: e, app: app, stop: make(chan struct{})}
	for i := range crashHumans {
		r.subjects = append(r.subjects, fmt.Sprintf("palm-subject-reload-%d-%s", i, randHex(4)))
	}
	var h2 http.Protocols
	h2.SetUnencryptedHTTP2(true)
	clients := []*reloadClient{
		{name: "HTTP/1.1", http: &http.Client{Jar: newJar(), Transport: &http.Transport{MaxIdleConnsPerHost: 4}}},
		{name: "HTTP/1.1", http: &http.Client{Jar: newJar(), Transport: &http.Transport{MaxIdleConnsPerHost: 4}}},
		{name: "HTTP/1.1 without keep-alive", http: &http.Client{Jar: newJar(), Transport: &http.Transport{DisableKeepAlives: true}}},
		{name: "HTTP/2", h2: true, http: &http.Client{Jar: newJar(), Transport: &http.Transport{Protocols: &h2}}},
		{name: "HTTP/2", h2: true, http: &http.Client{Jar: newJar(), Transport: &http.Transport{Protocols: &h2}}},
	}
	for _, c := range clients {
		c.connGen = map[net.Conn]int{}
		c.http.Timeout = 20 * time.Second
		c.http.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}

	var wg sync.WaitGroup
	var stopOnce sync.Once
	stopWorkers := func() {
		stopOnce.Do(func() { close(r.stop) })
		wg.Wait()
	}
	defer stopWorkers() // also when a reload fails the test
	for w, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !r.stopped(); i++ {
				r.registration(c, w, i)
				r.login(c)
				r.do(c, "GET", e.URL+"/v1/human/leaderboard", nil, "", http.StatusOK)
			}
		}()
	}

	time.Sleep(500 * time.Millisecond)
	checker := clients[3] // HTTP/2: no request of the checks may be dropped
	for i := range reloadCount {
		ttl := []string{"16m", "15m"}[i%2]
		r.mu.Lock()
		r.windows = append(r.windows, [2]time.Time{time.Now(), {}}) // open until the reload returns
		r.mu.Unlock()
		r.generation.Store(int64(i + 1)) // from here on, generation i is (being) shut down
		e.ReloadCaddyfile(t, reloadCaddyfile(app, ttl, i+1))
		r.mu.Lock()
		r.windows[i][1] = time.Now()
		r.mu.Unlock()
		r.expectSessionTTL(checker, ttl, i)
		time.Sleep(reloadGap + time.Duration(rand.IntN(500))*time.Millisecond)
	}
	stopWorkers()

	var h1Requests, h2Requests int64
	for _, c := range clients {
		if c.h2 {
			h2Requests += c.requests.Load()
			if !c.sawH2.Load() {
				t.Errorf("the HTTP/2 client never got an HTTP/2 response: is h2c enabled?")
			}
		} else {
			h1Requests += c.requests.Load()
		}
	}
	retried, probed := 0, 0
	for _, d := range r.drops {
		if d.retried {
			retried++
		} else {
			probed++
		}
		t.Logf("dropped by the old server (%s): %s %s: %v", d.why, d.method, d.path, d.err)
	}
	t.Logf("%d reloads; %d HTTP/2 requests; %d HTTP/1.1 requests, %d dropped before reaching palmgate (%d GETs retried, %d POSTs shown unprocessed by resending them)",
		reloadCount, h2Requests, h1Requests, len(r.drops), retried, probed)
	if h1Requests < 100 || h2Requests < 100 {
		t.Errorf("too little load: %d HTTP/1.1 and %d HTTP/2 requests", h1Requests, h2Requests)
	}
	if t.Failed() {
		return
	}
	r.verify()
}

// reloadRun is the shared state of TestReloadUnderLoad.
type reloadRun struct {
	t        *testing.T
	e        *env
	app      oidcClient
	subjects []string
	stop     chan struct{}

	// generation is the newest config generation: 0 at start, i+1 from the
	// start of reload i.
	generation atomic.Int64

	mu       sync.Mutex
	windows  [][2]time.Time // [start of `caddy reload`, its return]
	drops    []reloadDrop
	agents   []*agent  // registrations answered completed
	families []*string // the latest refresh token of each family
}

type reloadClient struct {
	name     string
	h2       bool
	http     *http.Client
	requests atomic.Int64
	sawH2    atomic.Bool

	mu      sync.Mutex
	connGen map[net.Conn]int // the config generation that last answered on a connection
}

// reloadDrop is an HTTP/1.1 request that failed at the transport.
type reloadDrop struct {
	client, method, path string
	at                   time.Time
	why                  string // why it is the reload's doing
	retried              bool   // replayable: retried; else resent to prove it unprocessed
	err                  error
}

func (r *reloadRun) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// window describes the reload window holding at, or returns "".
func (r *reloadRun) window(at time.Time) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, w := range r.windows {
		switch {
		case at.Before(w[0]):
		case w[1].IsZero():
			return fmt.Sprintf("during reload %d", i)
		case !at.After(w[1]):
			return fmt.Sprintf("during reload %d", i)
		case !at.After(w[1].Add(reloadGrace)):
			return fmt.Sprintf("%dms after reload %d", at.Sub(w[1]).Milliseconds(), i)
		}
	}
	return ""
}

// isReplayable is net/http's Request.isReplayable: requests the Transport
// itself may resend.
func isReplayable(req *http.Request) bool {
	if req.Body == nil || req.Body == http.NoBody || req.GetBody != nil {
		switch req.Method {
		case "GET", "HEAD", "OPTIONS", "TRACE":
			return true
		}
		return req.Header.Get("Idempotency-Key") != "" || req.Header.Get("X-Idempotency-Key") != ""
	}
	return false
}

// do sends a request and expects status want, applying the rules of
// TestReloadUnderLoad's comment to transport errors. It returns nil after
// reporting a failure.
func (r *reloadRun) do(c *reloadClient, method, u string, body []byte, contentType string, want int, headers ...string) *crashAnswer {
	t := r.t
	newRequest := func() *http.Request {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequest(method, u, rd)
		if err != nil {
			panic(err)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		return req
	}
	var conn net.Conn // the connection of the last attempt
	var reused bool
	send := func(req *http.Request) (a *crashAnswer, firstByte bool, err error) {
		trace := &httptrace.ClientTrace{
			GotConn:              func(ci httptrace.GotConnInfo) { conn, reused = ci.Conn, ci.Reused },
			GotFirstResponseByte: func() { firstByte = true },
		}
		c.requests.Add(1)
		resp, err := c.http.Do(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
		if err != nil {
			return nil, firstByte, err
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, true, err
		}
		if g, err := strconv.Atoi(resp.Header.Get(generationHeader)); err == nil && conn != nil {
			c.mu.Lock()
			c.connGen[conn] = g
			c.mu.Unlock()
		}
		if resp.ProtoMajor == 2 {
			c.sawH2.Store(true)
		} else if c.h2 {
			t.Errorf("%s %s: answered over %s, want HTTP/2", method, route(u), resp.Proto)
		}
		return &crashAnswer{status: resp.StatusCode, header: resp.Header, body: data}, firstByte, nil
	}

	req := newRequest()
	a, firstByte, err := send(req)
	if err != nil {
		at := time.Now()
		c.mu.Lock()
		gen, known := c.connGen[conn]
		c.mu.Unlock()
		switch {
		case c.h2:
			t.Errorf("%s %s over HTTP/2: %v (no request may fail over HTTP/2)", method, route(u), err)
			return nil
		case firstByte:
			t.Errorf("%s %s over HTTP/1.1: failed after the first byte of the response: %v", method, route(u), err)
			return nil
		}
		d := reloadDrop{client: c.name, method: method, path: route(u), at: at, retried: isReplayable(req), err: err}
		newest := int(r.generation.Load())
		if reused && known {
			if gen >= newest {
				t.Errorf("%s %s over HTTP/1.1: failed on a connection of the current config generation %d: %v", method, route(u), gen, err)
				return nil
			}
			d.why = fmt.Sprintf("kept-alive connection of generation %d, while generation %d runs", gen, newest)
		} else {
			when := r.window(at)
			if when == "" {
				t.Errorf("%s %s over HTTP/1.1: failed on a new connection at %s, outside every reload window: %v", method, route(u), at.Format("15:04:05.000"), err)
				return nil
			}
			d.why = "new connection, " + when
		}
		r.mu.Lock()
		r.drops = append(r.drops, d)
		r.mu.Unlock()
		// A replayable request is retried; a non-replayable one is resent to prove
		// that the first never reached palmgate (see the test's comment). A resend
		// that is itself dropped at the transport within a reload window (a busy
		// machine stretches the windows) is sent again, three sends in all: the answer
		// that finally comes proves the same of every earlier send.
		for sends := 2; ; sends++ {
			var firstByte bool
			if a, firstByte, err = send(newRequest()); err == nil {
				break
			}
			if firstByte || sends >= 3 || r.window(time.Now()) == "" {
				t.Errorf("%s %s over HTTP/1.1: dropped during a reload (%v), and again when sent %d times: %v", method, route(u), d.err, sends, err)
				return nil
			}
		}
		if !d.retried && a.status != want {
			t.Errorf("%s %s over HTTP/1.1: dropped at the transport during a reload (%v), then answered %d when sent again, want %d: the server had processed the request whose answer was lost\nbody: %s",
				method, route(u), d.err, a.status, want, testserver.Snippet(a.body))
			return nil
		}
	}
	if a.status != want {
		t.Errorf("%s %s over %s: status %d, want %d\nbody: %s", method, route(u), c.name, a.status, want, testserver.Snippet(a.body))
		return nil
	}
	return a
}

// route is a request's path without its ids and query, for messages.
func route(u string) string {
	if p, err := url.Parse(u); err == nil {
		u = p.Path
	}
	parts := strings.Split(u, "/")
	for i, s := range parts {
		if len(s) > 24 {
			parts[i] = "{id}"
		}
	}
	return strings.Join(parts, "/")
}

func (r *reloadRun) postJSON(c *reloadClient, path string, v any, want int) *crashAnswer {
	b, _ := json.Marshal(v)
	return r.do(c, "POST", r.e.URL+path, b, "application/json", want)
}

func (r *reloadRun) postForm(c *reloadClient, form url.Values, want int) *crashAnswer {
	return r.do(c, "POST", r.e.URL+"/oauth2/token", []byte(form.Encode()), "application/x-www-form-urlencoded", want)
}

// registration registers a new agent: init, owner's page, scan, status, lookups.
func (r *reloadRun) registration(c *reloadClient, w, i int) {
	a := newAgent(r.t, fmt.Sprintf("reload-agent-%d-%d", w, i))
	resp := r.postJSON(c, "/v1/agent/register/init", a.registration(time.Now()), http.StatusCreated)
	if resp == nil {
		return
	}
	var s struct{ SessionID string }
	_ = json.Unmarshal(resp.body, &s)
	if resp = r.do(c, "GET", r.e.URL+"/v1/agent/register/"+s.SessionID+"/verify", nil, "", http.StatusOK, "User-Agent", testserver.PhoneUserAgent); resp == nil {
		return
	}
	ch, ok := parseScanURL(testserver.AppLink(resp.body))
	if !ok {
		r.t.Errorf("registration page %s: no app link", s.SessionID)
		return
	}
	if r.postJSON(c, "/v1/palm/challenges/"+ch.ChallengeID+"/dev-scan", map[string]string{"nonce": ch.Nonce, "palmSubject": r.subjects[rand.IntN(len(r.subjects))]}, http.StatusOK) == nil {
		return
	}
	r.mu.Lock()
	r.agents = append(r.agents, a)
	r.mu.Unlock()
	if resp = r.do(c, "GET", r.e.URL+"/v1/agent/register/"+s.SessionID+"/status", nil, "", http.StatusOK); resp != nil {
		if st := str(jsonObject(resp.body)["status"]); st != "completed" {
			r.t.Errorf("session %s after its scan: status %q, want completed", s.SessionID, st)
		}
	}
	if resp = r.do(c, "GET", r.e.URL+"/v1/agent/verify/device/"+url.PathEscape(a.deviceID), nil, "", http.StatusOK); resp != nil {
		if reg, _ := jsonObject(resp.body)["registered"].(bool); !reg {
			r.t.Errorf("agent %s after its scan: device lookup %s, want registered", a.deviceID, resp.body)
		}
	}
	r.do(c, "GET", r.e.URL+"/v1/agent/verify/public-key/"+a.urlKey(), nil, "", http.StatusOK)
}

// login logs a person in, exchanges the code, refreshes twice and calls userinfo.
func (r *reloadRun) login(c *reloadClient) {
	verifier := oauth2.GenerateVerifier()
	resp := r.do(c, "GET", r.e.authURL(r.app, "code_challenge", oauth2.S256ChallengeFromVerifier(verifier), "code_challenge_method", "S256"), nil, "", http.StatusFound)
	if resp == nil {
		return
	}
	page := resp.header.Get("Location")
	if resp = r.do(c, "GET", page, nil, "", http.StatusOK, "Accept", "application/json"); resp == nil {
		return
	}
	var p loginPage
	_ = json.Unmarshal(resp.body, &p)
	if r.postJSON(c, "/v1/palm/challenges/"+p.ChallengeID+"/dev-scan", map[string]string{"nonce": p.Nonce, "palmSubject": r.subjects[rand.IntN(len(r.subjects))]}, http.StatusOK) == nil {
		return
	}
	if resp = r.do(c, "GET", page, nil, "", http.StatusFound); resp == nil {
		return
	}
	cb, _ := url.Parse(resp.header.Get("Location"))
	resp = r.postForm(c, url.Values{"grant_type": {"authorization_code"}, "code": {cb.Query().Get("code")},
		"redirect_uri": {r.app.redirects[0]}, "client_id": {r.app.id}, "client_secret": {r.app.secret}, "code_verifier": {verifier}}, http.StatusOK)
	if resp == nil {
		return
	}
	latest := refreshTokenOf(resp.body)
	r.mu.Lock()
	r.families = append(r.families, &latest)
	r.mu.Unlock()
	var access string
	for range 2 {
		resp = r.postForm(c, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {latest}, "client_id": {r.app.id}, "client_secret": {r.app.secret}}, http.StatusOK)
		if resp == nil {
			return
		}
		var tok struct {
			AccessToken  string `json:"access_token"`
			RefreshToken string `json:"refresh_token"`
		}
		_ = json.Unmarshal(resp.body, &tok)
		r.mu.Lock()
		latest = tok.RefreshToken
		r.mu.Unlock()
		access = tok.AccessToken
	}
	r.do(c, "GET", r.e.URL+"/oauth2/userinfo", nil, "", http.StatusOK, "Authorization", "Bearer "+access)
}

// expectSessionTTL checks that reload i applied: a new session expires ttl from
// now. Requests already in flight on the old server may still answer with the
// old configuration for a moment, so it looks until a request begun 2 s after
// the call (however long the machine takes to answer it) sees the new one.
func (r *reloadRun) expectSessionTTL(c *reloadClient, ttl string, i int) {
	want, _ := time.ParseDuration(ttl)
	deadline := time.Now().Add(2 * time.Second)
	for n := 0; ; n++ {
		now := time.Now()
		resp := r.postJSON(c, "/v1/agent/register/init", newAgent(r.t, fmt.Sprintf("reload-ttl-%d-%d", i, n)).registration(now), http.StatusCreated)
		if resp == nil {
			return
		}
		expires, err := time.Parse(time.RFC3339Nano, str(jsonObject(resp.body)["expiresAt"]))
		if err == nil && !expires.Before(now.Add(want).Truncate(time.Millisecond)) && !expires.After(time.Now().Add(want)) {
			return
		}
		if now.After(deadline) {
			r.t.Errorf("reload %d to registration_session_ttl %s: a new session expires at %s, %s after its init, want %s", i, ttl, expires.Format(time.RFC3339), expires.Sub(now).Round(time.Second), want)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// verify checks, after the reloads, that the answered registrations and refresh
// families are all there.
func (r *reloadRun) verify() {
	t, e := r.t, r.e
	for _, a := range r.agents {
		if l := e.lookupDevice(t, a.deviceID); !l.Registered {
			t.Errorf("agent %s, registered during the reloads: lookup %+v", a.deviceID, l)
		}
	}
	if got := totalAgents(e.leaderboard(t, "?limit=1000")); got != len(r.agents) {
		t.Errorf("leaderboard counts %d agents, %d were registered", got, len(r.agents))
	}
	for _, latest := range r.families {
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {*latest}, "client_id": {r.app.id}, "client_secret": {r.app.secret}}
		if resp := e.postToken(t, form); resp.Status != http.StatusOK {
			t.Errorf("refresh family %s: its latest token answers %d %s, want 200", tokenSID(*latest), resp.Status, testserver.Snippet(resp.Body))
		}
	}
	t.Logf("%d agents registered and %d refresh families rotated during the reloads: all there", len(r.agents), len(r.families))
}

// jsonObject decodes a JSON object body, or returns nil.
func jsonObject(b []byte) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}
