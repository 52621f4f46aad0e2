package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/pgtest"
	"github.com/palmgate/palmgate/internal/testserver"
)

// outcome is one answer of the load in TestMultiInstanceDatabaseRestart.
type outcome struct {
	op     string
	sent   time.Time
	status int
	err    string // what was wrong with the answer, or ""
}

// TestMultiInstanceDatabaseRestart stops the database under load and starts it
// again: every answer is right or 503 with Retry-After (never 500, never a wrong
// answer, never a token admitted on a revocation set older than its bound), and
// service resumes without restarting Caddy.
func TestMultiInstanceDatabaseRestart(t *testing.T) {
	t.Parallel()
	cluster := pgtest.NewCluster(t)
	c := newOIDCClient("shop", "")
	p := startPair(t, cluster.DSN(t), []oidcClient{c}, false)
	a, b := p.a, p.b

	ag := newAgent(t, "steady-agent")
	a.register(t, ag, a.subject("steady"))
	tok := a.redeem(t, c, p.loginAt(t, a, c, a.subject("steady-login")))
	client := &http.Client{Timeout: 15 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	// Each op sends one request and judges the answer: "" when right, "503" when
	// unavailable (with Retry-After), else what is wrong.
	type op struct {
		name string
		send func(base string) (*http.Response, error)
		ok   func(status int, body map[string]any, h http.Header) bool
	}
	form := func(v url.Values) func(base, path string) (*http.Response, error) {
		return func(base, path string) (*http.Response, error) {
			req, _ := http.NewRequest("POST", base+path, strings.NewReader(v.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return client.Do(req)
		}
	}
	get := func(path string, h ...string) func(base string) (*http.Response, error) {
		return func(base string) (*http.Response, error) {
			req, _ := http.NewRequest("GET", base+path, nil)
			for i := 0; i+1 < len(h); i += 2 {
				req.Header.Set(h[i], h[i+1])
			}
			return client.Do(req)
		}
	}
	ops := []op{
		{"leaderboard", get("/v1/human/leaderboard"), func(s int, _ map[string]any, _ http.Header) bool { return s == 200 }},
		{"lookup", get("/v1/agent/verify/device/" + ag.deviceID), func(s int, m map[string]any, _ http.Header) bool {
			return s == 200 && m["registered"] == true
		}},
		{"authorize", get(strings.TrimPrefix(a.authURL(c), a.URL)), func(s int, _ map[string]any, h http.Header) bool {
			return s == 302 && strings.HasPrefix(h.Get("Location"), p.issuer+"/oauth2/verify?auth_request_id=")
		}},
		{"userinfo", get("/oauth2/userinfo", "Authorization", "Bearer "+tok.access), func(s int, m map[string]any, _ http.Header) bool {
			return s == 200 && m["sub"] == tok.sub
		}},
		{"bearer", get("/api/x", "Authorization", "Bearer "+tok.access), func(s int, _ map[string]any, _ http.Header) bool { return s == 200 }},
		{"token", func(base string) (*http.Response, error) {
			return form(url.Values{"grant_type": {"authorization_code"}, "code": {"no-such-code"}, "redirect_uri": {c.redirects[0]},
				"client_id": {c.id}, "client_secret": {c.secret}})(base, "/oauth2/token")
		}, func(s int, m map[string]any, _ http.Header) bool { return s == 400 && m["error"] == "invalid_grant" }},
		{"register-init", func(base string) (*http.Response, error) {
			body, _ := json.Marshal(newAgent(t, "load-"+randHex(4)).registration(time.Now()))
			req, _ := http.NewRequest("POST", base+"/v1/agent/register/init", strings.NewReader(string(body)))
			req.Header.Set("Content-Type", "application/json")
			return client.Do(req)
		}, func(s int, _ map[string]any, _ http.Header) bool { return s == 201 }},
	}
	run := func(o op, base string) outcome {
		out := outcome{op: o.name, sent: time.Now()}
		resp, err := o.send(base)
		if err != nil {
			out.err = "no answer: " + err.Error()
			return out
		}
		defer resp.Body.Close()
		out.status = resp.StatusCode
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		switch {
		case resp.StatusCode == http.StatusServiceUnavailable:
			if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 {
				out.err = fmt.Sprintf("503 with Retry-After %q", resp.Header.Get("Retry-After"))
			}
		case !o.ok(resp.StatusCode, m, resp.Header):
			out.err = fmt.Sprintf("wrong answer %d %v", resp.StatusCode, m)
		}
		return out
	}

	var mu sync.Mutex
	var outcomes []outcome
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				base := a.URL
				if i%2 == 1 {
					base = b.URL
				}
				out := run(ops[i%len(ops)], base)
				mu.Lock()
				outcomes = append(outcomes, out)
				mu.Unlock()
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}

	time.Sleep(time.Second) // load on a healthy database
	stopped := time.Now()
	if err := cluster.Stop(); err != nil {
		t.Fatalf("stopping the database: %v", err)
	}
	// Past the revocation bound, until the outage has been answered: on a loaded
	// machine the workers may not have sent much in a fixed time.
	time.Sleep(time.Until(stopped.Add(revocationBound + observeSlack + time.Second)))
	waitFor(t, "a 503 while the database is down", 60*time.Second, time.Now(), func() string {
		mu.Lock()
		defer mu.Unlock()
		for _, o := range outcomes {
			if o.status == http.StatusServiceUnavailable {
				return ""
			}
		}
		return "no 503 yet"
	})
	startedAgain := time.Now()
	if err := cluster.Start(); err != nil {
		t.Fatalf("starting the database again: %v", err)
	}
	// Service resumes: every op answers right again on both instances.
	recovered := waitFor(t, "every request answered again after the database restart", 30*time.Second, startedAgain, func() string {
		for _, e := range []*env{a, b} {
			for _, o := range ops {
				if out := run(o, e.URL); out.status == http.StatusServiceUnavailable || out.err != "" {
					return fmt.Sprintf("%s at %s: %d %s", o.name, e.URL, out.status, out.err)
				}
			}
		}
		return ""
	})
	close(stop)
	wg.Wait()

	counts := map[string]map[int]int{}
	var during503 int
	for _, o := range outcomes {
		if counts[o.op] == nil {
			counts[o.op] = map[int]int{}
		}
		counts[o.op][o.status]++
		if o.err != "" {
			t.Errorf("%s sent %s after the stop: %s", o.op, o.sent.Sub(stopped).Round(time.Millisecond), o.err)
		}
		if o.status == http.StatusServiceUnavailable {
			during503++
		}
		// No token is admitted on a revocation set older than its bound.
		if (o.op == "userinfo" || o.op == "bearer") && o.status == http.StatusOK &&
			o.sent.After(stopped.Add(revocationBound+observeSlack)) && o.sent.Before(startedAgain) {
			t.Errorf("%s admitted a token %s after the database stopped, on a revocation set past its %s bound",
				o.op, o.sent.Sub(stopped).Round(time.Millisecond), revocationBound)
		}
	}
	t.Logf("answers by op and status: %v; service back %s after the database restarted", counts, recovered.Round(time.Millisecond))
	if during503 == 0 {
		t.Errorf("no request was answered 503 while the database was down: the outage went unnoticed")
	}
}

// TestPostgresUnreachableAtStart: a database that cannot be reached at start is a
// clear error naming the host, within the connect timeout, not a hang: a closed port
// (refused at once) and a server that accepts connections and never answers (only
// the connect timeout ends the wait).
func TestPostgresUnreachableAtStart(t *testing.T) {
	t.Parallel()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	var held []net.Conn
	var heldMu sync.Mutex
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			heldMu.Lock()
			held = append(held, conn) // read nothing, answer nothing
			heldMu.Unlock()
		}
	}()
	t.Cleanup(func() {
		heldMu.Lock()
		defer heldMu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	for _, tc := range []struct {
		name, host string
	}{
		{"closed port", "127.0.0.1:" + strconv.Itoa(testserver.FreePort(t))},
		{"silent server", silent.Addr().String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			began := time.Now()
			out := testserver.StartExpectFailure(t, testserver.Options{
				Storage: fmt.Sprintf("storage postgres \"postgres://palmgate@%s/palmgate?sslmode=disable\" {\n\tconnect_timeout 2s\n}", tc.host),
			})
			took := time.Since(began)
			t.Logf("exited after %s", took.Round(time.Millisecond))
			if took > 8*time.Second {
				t.Errorf("the server took %s to give up on an unreachable database, want about the 2 s connect timeout", took)
			}
			if !strings.Contains(out, tc.host) {
				t.Errorf("the error does not name the database host %s:\n%s", tc.host, out)
			}
		})
	}
}
