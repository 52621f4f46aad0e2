// Command soak runs the palmgate build of Caddy under mixed load for a set time
// and samples, every interval, the server's resident memory (VmRSS), the disk use
// of its Badger directory, the store's record counts by kind (admin
// GET /palmgate/stats) and the request rate. It prints a table as it goes, writes
// the samples as CSV and ends with a verdict: did memory, disk and the records that
// expire stay bounded?
//
//	go build -o bin/caddy ./cmd/caddy
//	go run ./soak -duration 10m -out soak.csv
//
// The server runs with short lifetimes so that garbage appears quickly:
// registration_session_ttl 10s, auth_code_ttl 5s, access_token_ttl 30s,
// refresh_token_ttl 2m, challenge_max_age 1m (replay markers live 2 x that + 1m),
// rate_limit off, dev. The load opens registration sessions
// (most left to expire, some completed with a simulated palm scan), logins (some
// abandoned before the scan, some codes never redeemed, the rest exchanged,
// refreshed and used at userinfo; 5% then reuse a rotated refresh token, which
// revokes the family), agent lookups and leaderboard reads.
//
// Verdict: a series is bounded when the maximum of the last third of the samples
// is at most -bound (1.5) times the maximum of the middle third. It is computed
// for RSS, for the disk use, and for the record kinds that expire within the run
// (pending-session index, replay markers, codes, grants, revocations). Sessions,
// palm challenges and authorization requests are kept 10 minutes past their expiry
// when unfinished, and a day when a palm verified them, so the verified ones, and
// the disk they occupy, grow for the first 24 hours of any steady load: the soak
// reports their growth rate rather than judging them. The exit status is 1 when RSS or an
// expiring kind is not bounded, or when requests failed.
package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
)

// Record kinds the table shows (keys of GET /palmgate/stats).
var (
	// expiring kinds live at most a few minutes with the soak's lifetimes.
	expiringKinds = []string{"agent/pg", "agent/m", "oidc/code", "oidc/grant", "oidc/revoked"}
	// retainedKinds are kept past their expiry by design: a day once verified.
	retainedKinds = []string{"agent/s", "palm/c", "oidc/ar"}
	// permanentKinds are registered agents and their indexes.
	permanentKinds = []string{"agent/d"}
)

const (
	clientID     = "soak"
	clientSecret = "soak-secret-0123456789abcdef"
	redirectURI  = "https://soak.example/callback"
)

type config struct {
	duration    time.Duration
	interval    time.Duration
	concurrency int
	caddy       string
	out         string
	dataDir     string
	keep        bool
	bound       float64
}

func main() {
	var c config
	flag.DurationVar(&c.duration, "duration", 10*time.Minute, "how long to run the load")
	flag.DurationVar(&c.interval, "interval", 10*time.Second, "time between samples")
	flag.IntVar(&c.concurrency, "concurrency", 4, "concurrent load workers")
	flag.StringVar(&c.caddy, "caddy", "bin/caddy", "the palmgate build of caddy (make build)")
	flag.StringVar(&c.out, "out", "soak.csv", "CSV file of the samples")
	flag.StringVar(&c.dataDir, "datadir", "", "directory for the server's data and config (default: a new temporary one)")
	flag.BoolVar(&c.keep, "keep", false, "keep the data directory afterwards")
	flag.Float64Var(&c.bound, "bound", 1.5, "bounded: max of the last third <= bound x max of the middle third")
	flag.Parse()
	ok, err := run(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// sample is one row of the table.
type sample struct {
	at         time.Duration
	rssKB      int64
	hwmKB      int64
	heapMB     float64 // Go heap in use, from the admin /debug/vars (0 if unavailable)
	diskBytes  int64   // sum of file sizes
	allocBytes int64   // allocated blocks (files may be sparse)
	sstBytes   int64
	vlogBytes  int64
	memBytes   int64 // memtable write-ahead logs
	records    map[string]int
	total      int
	rps        float64
	errors     int64
}

func run(c config) (bool, error) {
	bin, err := filepath.Abs(c.caddy)
	if err != nil {
		return false, err
	}
	if _, err := os.Stat(bin); err != nil {
		return false, fmt.Errorf("caddy binary: %w (build it with `make build` or pass -caddy)", err)
	}
	dir := c.dataDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "palmgate-soak-"); err != nil {
			return false, err
		}
		if !c.keep {
			defer os.RemoveAll(dir)
		}
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	srv, err := startServer(bin, dir)
	if err != nil {
		return false, err
	}
	defer srv.stop()
	fmt.Printf("palmgate soak: %s of load, %d workers, a sample every %s; server pid %d at %s, data in %s\n",
		c.duration, c.concurrency, c.interval, srv.cmd.Process.Pid, srv.base, srv.storeDir)

	ctx, cancel := context.WithTimeout(context.Background(), c.duration)
	defer cancel()
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	l := newLoad(srv.base)
	var wg sync.WaitGroup
	for i := range c.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.worker(ctx, i)
		}()
	}

	start := time.Now()
	var samples []sample
	lastReqs, lastAt := int64(0), start
	take := func() {
		now := time.Now()
		reqs := l.requests.Load()
		s := srv.sample(now.Sub(start))
		s.rps = float64(reqs-lastReqs) / now.Sub(lastAt).Seconds()
		s.errors = l.errors.Load()
		lastReqs, lastAt = reqs, now
		if len(samples) == 0 {
			printHeader()
		}
		samples = append(samples, s)
		printRow(s)
	}
	take()
	ticker := time.NewTicker(c.interval)
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-ticker.C:
			take()
			if srv.exited() {
				fmt.Println("the server exited during the run; its log:\n" + srv.logTail())
				cancel()
				done = true
			}
		}
	}
	ticker.Stop()
	wg.Wait()
	if !srv.exited() {
		take() // the end of the run
	}

	if err := writeCSV(c.out, samples); err != nil {
		return false, err
	}
	fmt.Printf("\n%d requests in %s (%.0f/s), %d failed; samples written to %s\n",
		l.requests.Load(), time.Since(start).Round(time.Second), float64(l.requests.Load())/time.Since(start).Seconds(), l.errors.Load(), c.out)
	l.printOps()
	l.printErrors()
	ok := verdict(samples, c.bound)
	if l.errors.Load() > 0 {
		ok = false
	}
	if err := srv.stop(); err != nil {
		fmt.Println("server stop:", err)
		ok = false
	}
	if srv.crashed {
		ok = false
	}
	return ok, nil
}

// ---- the server ----

type server struct {
	cmd       *exec.Cmd
	base      string // http://127.0.0.1:port
	admin     string // http://127.0.0.1:adminport
	storeDir  string
	logPath   string
	done      chan struct{}
	waitErr   error
	stopOnce  sync.Once
	stopErr   error
	crashed   bool
	adminHTTP *http.Client
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startServer(bin, dir string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	adminPort, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &server{
		base:      "http://127.0.0.1:" + strconv.Itoa(port),
		admin:     "http://127.0.0.1:" + strconv.Itoa(adminPort),
		storeDir:  filepath.Join(dir, "palmgate"),
		logPath:   filepath.Join(dir, "caddy.log"),
		done:      make(chan struct{}),
		adminHTTP: &http.Client{Timeout: 60 * time.Second},
	}
	caddyfile := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	persist_config off
	palmgate {
		issuer %s
		storage badger %s
		dev
		rate_limit off
		max_pending_logins off
		max_pending_registrations off
		registration_session_ttl 10s
		auth_code_ttl 5s
		access_token_ttl 30s
		refresh_token_ttl 2m
		challenge_max_age 1m
		client %s {
			secret %s
			redirect_uri %s
			name "Soak"
		}
	}
}

%s {
	palmgate
}
`, adminPort, s.base, s.storeDir, clientID, clientSecret, redirectURI, s.base)
	cfgPath := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(cfgPath, []byte(caddyfile), 0o600); err != nil {
		return nil, err
	}
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	logFile, err := os.Create(s.logPath)
	if err != nil {
		return nil, err
	}
	s.cmd = exec.Command(bin, "run", "--config", cfgPath, "--adapter", "caddyfile")
	s.cmd.Env = append(os.Environ(), "HOME="+home, "XDG_DATA_HOME="+filepath.Join(home, "data"), "XDG_CONFIG_HOME="+filepath.Join(home, "config"))
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	// Should the soak die without stopping it (say, SIGPIPE from `| head`), the
	// server gets SIGTERM rather than running on as an orphan.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := s.cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		logFile.Close()
		close(s.done)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.base + "/v1/human/leaderboard")
		if err == nil {
			resp.Body.Close()
			return s, nil
		}
		if s.exited() || time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("the server did not start: %v\n%s", err, s.logTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// stop interrupts the server and waits for it (SIGKILL after 15 s).
func (s *server) stop() error {
	s.stopOnce.Do(func() {
		if s.exited() {
			s.crashed = true
			s.stopErr = fmt.Errorf("the server had exited: %v", s.waitErr)
			return
		}
		_ = s.cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.done:
			if s.waitErr != nil {
				s.stopErr = fmt.Errorf("the server exited with %v after SIGINT", s.waitErr)
			}
		case <-time.After(15 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
			s.stopErr = errors.New("the server did not exit within 15 s of SIGINT; killed")
		}
	})
	return s.stopErr
}

func (s *server) logTail() string {
	b, _ := os.ReadFile(s.logPath)
	if len(b) > 8<<10 {
		b = b[len(b)-8<<10:]
	}
	return string(b)
}

func (s *server) sample(at time.Duration) sample {
	sm := sample{at: at, records: map[string]int{}}
	sm.rssKB, sm.hwmKB = procStatus(s.cmd.Process.Pid)
	_ = filepath.WalkDir(s.storeDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		sm.diskBytes += info.Size()
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			sm.allocBytes += st.Blocks * 512
		}
		switch filepath.Ext(path) {
		case ".sst":
			sm.sstBytes += info.Size()
		case ".vlog":
			sm.vlogBytes += info.Size()
		case ".mem":
			sm.memBytes += info.Size()
		}
		return nil
	})
	var st struct {
		Records map[string]int `json:"records"`
	}
	if err := s.adminJSON("/palmgate/stats", &st); err == nil {
		sm.records = st.Records
		for _, n := range st.Records {
			sm.total += n
		}
	} else {
		sm.total = -1
	}
	var vars struct {
		Memstats struct {
			HeapInuse uint64
		} `json:"memstats"`
	}
	if err := s.adminJSON("/debug/vars", &vars); err == nil {
		sm.heapMB = float64(vars.Memstats.HeapInuse) / (1 << 20)
	}
	return sm
}

func (s *server) adminJSON(path string, v any) error {
	resp, err := s.adminHTTP.Get(s.admin + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// procStatus reads VmRSS and VmHWM (kB) of a process.
func procStatus(pid int) (rss, hwm int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1, -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = n
		case "VmHWM:":
			hwm = n
		}
	}
	return rss, hwm
}

// ---- the load ----

type load struct {
	base     string
	http     *http.Client
	requests atomic.Int64
	errors   atomic.Int64

	mu       sync.Mutex
	errTexts map[string]int
	ops      map[string]int
	agents   []registeredAgent // a ring of registered agents, for lookups
	next     atomic.Int64
}

type registeredAgent struct{ deviceID, urlKey string }

func newLoad(base string) *load {
	// The workers are one browser: it keeps each login's cookie.
	jar, _ := cookiejar.New(nil)
	return &load{
		base: base,
		http: &http.Client{
			Jar:           jar,
			Timeout:       30 * time.Second,
			Transport:     &http.Transport{MaxIdleConnsPerHost: 64},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		errTexts: map[string]int{},
		ops:      map[string]int{},
	}
}

func (l *load) worker(ctx context.Context, id int) {
	rng := mrand.New(mrand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
	for ctx.Err() == nil {
		var op string
		switch p := rng.Float64(); {
		case p < 0.35:
			op = l.register(ctx, rng)
		case p < 0.60:
			op = l.login(ctx, rng)
		case p < 0.85:
			op = l.lookup(ctx, rng)
		default:
			op = "leaderboard"
			l.call(ctx, "GET", "/v1/human/leaderboard?limit=100", nil, "", http.StatusOK)
		}
		l.mu.Lock()
		l.ops[op]++
		l.mu.Unlock()
	}
}

// call sends a request and expects status want; it returns the body, or nil
// after counting a failure. A request cut short by the end of the run is not one.
func (l *load) call(ctx context.Context, method, path string, body []byte, contentType string, want int, headers ...string) (*http.Response, []byte) {
	u := path
	if strings.HasPrefix(path, "/") {
		u = l.base + path
	}
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		l.fail("building request: " + err.Error())
		return nil, nil
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	l.requests.Add(1)
	resp, err := l.http.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			l.fail(fmt.Sprintf("%s %s: %v", method, route(path), err))
		}
		return nil, nil
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		if ctx.Err() == nil {
			l.fail(fmt.Sprintf("%s %s: reading the body: %v", method, route(path), err))
		}
		return nil, nil
	}
	if resp.StatusCode != want {
		l.fail(fmt.Sprintf("%s %s: status %d, want %d: %.200s", method, route(path), resp.StatusCode, want, data))
		return nil, nil
	}
	return resp, data
}

// route strips ids from a path, to group errors.
func route(p string) string {
	p, _, _ = strings.Cut(p, "?")
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if len(s) > 20 {
			parts[i] = "{id}"
		}
	}
	return strings.Join(parts, "/")
}

func (l *load) fail(text string) {
	l.errors.Add(1)
	l.mu.Lock()
	l.errTexts[text]++
	l.mu.Unlock()
}

func (l *load) postJSON(ctx context.Context, path string, v any, want int) []byte {
	b, _ := json.Marshal(v)
	_, data := l.call(ctx, "POST", path, b, "application/json", want)
	return data
}

// register opens a registration session; 15% are completed with a simulated
// palm scan by one of 50 people, the rest are left to expire (a third polled once).
func (l *load) register(ctx context.Context, rng *mrand.Rand) string {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(pub)
	n := l.next.Add(1)
	deviceID := fmt.Sprintf("soak-%d-%d", time.Now().UnixNano(), n)
	ms := time.Now().UnixMilli()
	msg := fmt.Sprintf("soak%d-register-%d", n, ms)
	data := l.postJSON(ctx, "/v1/agent/register/init", map[string]any{
		"deviceId": deviceID, "publicKey": base64.StdEncoding.EncodeToString(der), "message": msg,
		"signature": base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte(msg))), "timestamp": ms,
	}, http.StatusCreated)
	var session struct {
		SessionID string `json:"sessionId"`
	}
	if data == nil || json.Unmarshal(data, &session) != nil {
		return "init"
	}
	switch p := rng.Float64(); {
	case p < 0.15:
		// The owner's page as a phone gets it: the app link is the scan URL.
		_, data := l.call(ctx, "GET", "/v1/agent/register/"+session.SessionID+"/verify", nil, "", http.StatusOK, "User-Agent", testserver.PhoneUserAgent)
		scan, err := url.Parse(testserver.AppLink(data))
		if data == nil || err != nil || scan.Query().Get("nonce") == "" {
			return "init+scan"
		}
		if l.postJSON(ctx, scan.Path+"/dev-scan",
			map[string]string{"nonce": scan.Query().Get("nonce"), "palmSubject": fmt.Sprintf("soak-person-%d", rng.IntN(50))}, http.StatusOK) != nil {
			l.mu.Lock()
			if len(l.agents) < 10000 {
				l.agents = append(l.agents, registeredAgent{deviceID, base64.URLEncoding.EncodeToString(der)})
			} else {
				l.agents[rng.IntN(len(l.agents))] = registeredAgent{deviceID, base64.URLEncoding.EncodeToString(der)}
			}
			l.mu.Unlock()
		}
		return "init+scan"
	case p < 0.40:
		l.call(ctx, "GET", "/v1/agent/register/"+session.SessionID+"/status", nil, "", http.StatusOK)
		return "init+poll"
	default:
		return "init"
	}
}

// login runs a login: 25% are abandoned before the scan, 10% of the codes are
// never redeemed, the rest are exchanged, refreshed 1 to 3 times and used once;
// 5% of those then reuse their first refresh token, revoking the family.
func (l *load) login(ctx context.Context, rng *mrand.Rand) string {
	verifier := randToken(32)
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{
		"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirectURI},
		"scope": {"openid offline_access"}, "state": {randToken(8)}, "nonce": {randToken(8)},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
	}
	resp, _ := l.call(ctx, "GET", "/oauth2/authorize?"+q.Encode(), nil, "", http.StatusFound)
	if resp == nil {
		return "login"
	}
	verify := resp.Header.Get("Location")
	if rng.Float64() < 0.25 {
		return "login-abandoned"
	}
	_, data := l.call(ctx, "GET", verify, nil, "", http.StatusOK, "Accept", "application/json")
	var ch struct{ ChallengeID, Nonce string }
	if data == nil || json.Unmarshal(data, &ch) != nil {
		return "login"
	}
	if l.postJSON(ctx, "/v1/palm/challenges/"+ch.ChallengeID+"/dev-scan",
		map[string]string{"nonce": ch.Nonce, "palmSubject": fmt.Sprintf("soak-person-%d", rng.IntN(50))}, http.StatusOK) == nil {
		return "login"
	}
	resp, _ = l.call(ctx, "GET", verify, nil, "", http.StatusFound)
	if resp == nil {
		return "login"
	}
	cb, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || cb.Query().Get("code") == "" {
		l.fail("login: no code in " + resp.Header.Get("Location"))
		return "login"
	}
	if rng.Float64() < 0.10 {
		return "login-code-unused"
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {cb.Query().Get("code")}, "redirect_uri": {redirectURI},
		"client_id": {clientID}, "client_secret": {clientSecret}, "code_verifier": {verifier}}
	var tok struct {
		AccessToken  string `json:"access_token"`
		RefreshToken string `json:"refresh_token"`
	}
	_, data = l.call(ctx, "POST", "/oauth2/token", []byte(form.Encode()), "application/x-www-form-urlencoded", http.StatusOK)
	if data == nil || json.Unmarshal(data, &tok) != nil {
		return "login"
	}
	first := tok.RefreshToken
	for range 1 + rng.IntN(3) {
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}, "client_id": {clientID}, "client_secret": {clientSecret}}
		_, data = l.call(ctx, "POST", "/oauth2/token", []byte(form.Encode()), "application/x-www-form-urlencoded", http.StatusOK)
		if data == nil || json.Unmarshal(data, &tok) != nil {
			return "login"
		}
	}
	if rng.Float64() < 0.05 {
		// Reuse of a rotated refresh token revokes the family (a revocation
		// record lives as long as the family's last access token).
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {first}, "client_id": {clientID}, "client_secret": {clientSecret}}
		l.call(ctx, "POST", "/oauth2/token", []byte(form.Encode()), "application/x-www-form-urlencoded", http.StatusBadRequest)
		l.call(ctx, "GET", "/oauth2/userinfo", nil, "", http.StatusUnauthorized, "Authorization", "Bearer "+tok.AccessToken)
		return "login+reuse"
	}
	l.call(ctx, "GET", "/oauth2/userinfo", nil, "", http.StatusOK, "Authorization", "Bearer "+tok.AccessToken)
	return "login+refresh"
}

// lookup looks a registered agent up by device and by key (or an unknown one).
func (l *load) lookup(ctx context.Context, rng *mrand.Rand) string {
	l.mu.Lock()
	var a registeredAgent
	if len(l.agents) > 0 && rng.Float64() < 0.8 {
		a = l.agents[rng.IntN(len(l.agents))]
	}
	l.mu.Unlock()
	if a.deviceID == "" {
		l.call(ctx, "GET", "/v1/agent/verify/device/unknown-"+randToken(6), nil, "", http.StatusOK)
		return "lookup-unknown"
	}
	l.call(ctx, "GET", "/v1/agent/verify/device/"+url.PathEscape(a.deviceID), nil, "", http.StatusOK)
	l.call(ctx, "GET", "/v1/agent/verify/public-key/"+a.urlKey, nil, "", http.StatusOK)
	return "lookup"
}

func randToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (l *load) printOps() {
	l.mu.Lock()
	defer l.mu.Unlock()
	names := make([]string, 0, len(l.ops))
	for k := range l.ops {
		names = append(names, k)
	}
	sort.Strings(names)
	var parts []string
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s %d", k, l.ops[k]))
	}
	fmt.Println("operations: " + strings.Join(parts, ", "))
}

func (l *load) printErrors() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for text, n := range l.errTexts {
		fmt.Printf("  %d x %s\n", n, text)
	}
}

// ---- output ----

var columns = []string{"t_s", "rss_mb", "hwm_mb", "heap_mb", "disk_mb", "alloc_mb", "sst_mb", "vlog_mb", "mem_mb",
	"records", "agent/s", "palm/c", "oidc/ar", "agent/pg", "agent/m", "oidc/code", "oidc/grant", "oidc/revoked", "agent/d", "req_s", "errors"}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

func (s sample) values() []string {
	v := []string{
		strconv.Itoa(int(s.at.Round(time.Second).Seconds())),
		fmt.Sprintf("%.1f", float64(s.rssKB)/1024), fmt.Sprintf("%.1f", float64(s.hwmKB)/1024), fmt.Sprintf("%.1f", s.heapMB),
		fmt.Sprintf("%.1f", mb(s.diskBytes)), fmt.Sprintf("%.1f", mb(s.allocBytes)),
		fmt.Sprintf("%.1f", mb(s.sstBytes)), fmt.Sprintf("%.1f", mb(s.vlogBytes)), fmt.Sprintf("%.1f", mb(s.memBytes)),
		strconv.Itoa(s.total),
	}
	for _, k := range columns[10:19] {
		v = append(v, strconv.Itoa(s.records[k]))
	}
	return append(v, fmt.Sprintf("%.0f", s.rps), strconv.FormatInt(s.errors, 10))
}

func printHeader() {
	var b strings.Builder
	for _, c := range columns {
		fmt.Fprintf(&b, "%9s", shortName(c))
	}
	fmt.Println(b.String())
}

func shortName(c string) string {
	if len(c) > 8 {
		return c[len(c)-8:]
	}
	return c
}

func printRow(s sample) {
	var b strings.Builder
	for _, v := range s.values() {
		fmt.Fprintf(&b, "%9s", v)
	}
	fmt.Println(b.String())
}

func writeCSV(path string, samples []sample) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write(columns)
	for _, s := range samples {
		_ = w.Write(s.values())
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// thirds returns the maxima of the middle and the last third of xs (the first
// sample, taken before any load, is left out).
func thirds(xs []float64) (mid, last float64, ok bool) {
	if len(xs) > 1 {
		xs = xs[1:]
	}
	n := len(xs)
	if n < 3 {
		return 0, 0, false
	}
	mid, last = math.Inf(-1), math.Inf(-1)
	for i, x := range xs {
		switch {
		case i >= 2*n/3:
			last = max(last, x)
		case i >= n/3:
			mid = max(mid, x)
		}
	}
	return mid, last, true
}

func series(samples []sample, f func(sample) float64) []float64 {
	xs := make([]float64, len(samples))
	for i, s := range samples {
		xs[i] = f(s)
	}
	return xs
}

// verdict prints whether each series stayed bounded and returns false when RSS
// or an expiring record kind did not.
func verdict(samples []sample, bound float64) bool {
	ok := true
	check := func(name string, xs []float64, judged bool) {
		mid, last, enough := thirds(xs)
		if !enough {
			fmt.Printf("  %-22s too few samples to judge\n", name)
			return
		}
		bounded := last <= bound*mid || last <= 2 // a handful of records is bounded whatever its ratio
		word := "bounded"
		if !bounded {
			word = "GROWING"
			if judged {
				ok = false
			}
		}
		if !judged {
			word += " (not judged)"
		}
		fmt.Printf("  %-22s middle-third max %10.1f, last-third max %10.1f, ratio %5.2f: %s\n", name, mid, last, last/math.Max(mid, 1e-9), word)
	}
	fmt.Printf("\nbounded = max of the last third <= %.2f x max of the middle third:\n", bound)
	check("RSS (MB)", series(samples, func(s sample) float64 { return float64(s.rssKB) / 1024 }), true)
	check("Go heap in use (MB)", series(samples, func(s sample) float64 { return s.heapMB }), false)
	check("disk, file sizes (MB)", series(samples, func(s sample) float64 { return mb(s.diskBytes) }), false)
	check("disk, allocated (MB)", series(samples, func(s sample) float64 { return mb(s.allocBytes) }), false)
	for _, k := range expiringKinds {
		check("records "+k, series(samples, func(s sample) float64 { return float64(s.records[k]) }), true)
	}
	if len(samples) >= 2 {
		first, last := samples[0], samples[len(samples)-1]
		secs := (last.at - first.at).Seconds()
		fmt.Println("\nrecords kept past their expiry by design (verified ones a day: they grow for 24 h under steady load), and permanent ones:")
		for _, k := range append(append([]string{}, retainedKinds...), permanentKinds...) {
			fmt.Printf("  %-10s %7d -> %7d (%.1f/s)\n", k, first.records[k], last.records[k], float64(last.records[k]-first.records[k])/secs)
		}
		grow := float64(last.allocBytes-first.allocBytes) / float64(max(last.total-first.total, 1))
		fmt.Printf("  disk grew %.1f MB for %d more records (%.0f bytes allocated per retained record)\n",
			mb(last.allocBytes-first.allocBytes), last.total-first.total, grow)
	}
	if ok {
		fmt.Println("\nverdict: RSS and the expiring records stayed bounded")
	} else {
		fmt.Println("\nverdict: NOT bounded (see above)")
	}
	return ok
}
