package service

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palmgate/palmgate/bench/minimalcaddy"
	"github.com/palmgate/palmgate/core/agent"
	"github.com/palmgate/palmgate/internal/loadgen"
	"github.com/palmgate/palmgate/internal/testserver"
)

func TestMain(m *testing.M) { testserver.Main(m) }

// The OAuth client of the code exchanges.
const (
	// clientID is a client with ES256 ID tokens (id_token_signed_response_alg);
	// the minimal token handler signs with ES256 for it alone.
	clientID = minimalcaddy.ES256Client
	// clientIDRS is a client with the default ID-token algorithm, RS256: the
	// exchange goal's ratio to its signing work is measured on it.
	clientIDRS  = "bench-rs"
	redirectURI = "https://bench.example/callback"
)

// caddyfile is the server under measurement: palmgate (no dev mode: palm
// challenges complete only with assertions of the bench attestor, as in
// production), the rate limit off (one client address sends everything), codes
// that live an hour (they are minted before the rounds), and Caddy's static
// `respond` on /static, the baseline of the lookups, and on /static-board of a
// body as long as the seeded leaderboard's (top 100), the leaderboard's
// baseline. {attestor}, {secret} and {boardbody} are filled in by launchSite;
// testserver fills in the others.
const caddyfile = `{
	admin 127.0.0.1:{adminport}
	persist_config off
	palmgate {
		issuer http://127.0.0.1:{port}
		{storage}
		rate_limit off
		max_pending_logins off
		max_pending_registrations off
		auth_code_ttl 1h
		palm_attestor ` + AttestorName + ` {attestor}
		client ` + clientID + ` {
			secret {secret}
			redirect_uri ` + redirectURI + `
			id_token_signed_response_alg ES256
		}
		client ` + clientIDRS + ` {
			secret {secret}
			redirect_uri ` + redirectURI + `
		}
	}
}

http://127.0.0.1:{port} {
	palmgate
	handle /static {
		respond "ok" 200
	}
	handle /static-board {
		respond "{boardbody}" 200
	}
}
`

// attestor is the palm engine of the benchmark: it signs assertions as the
// configured palm_attestor.
type attestor struct {
	alg  string // EdDSA or ES256
	ed   ed25519.PrivateKey
	ec   *ecdsa.PrivateKey
	spki string
	hdr  string // base64url of the JWS header
}

func newAttestor(t testing.TB, kind string) *attestor {
	t.Helper()
	a := &attestor{}
	var pub any
	switch kind {
	case "ed25519":
		p, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		a.alg, a.ed, pub = "EdDSA", priv, p
	case "p256":
		priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		a.alg, a.ec, pub = "ES256", priv, &priv.PublicKey
	default:
		t.Fatalf("unknown attestor key type %q (ed25519 or p256)", kind)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	a.spki = base64.StdEncoding.EncodeToString(der)
	a.hdr = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"` + a.alg + `","typ":"JWT"}`))
	return a
}

// assertion is the compact JWS a palm engine sends once it has recognised
// subject for challenge id: built by hand, as cheaply as a real engine would.
func (a *attestor) assertion(audience, challengeID, nonce, subject string) string {
	now := time.Now().Unix()
	payload, _ := json.Marshal(map[string]any{
		"iss": AttestorName, "aud": audience, "sub": subject, "challenge": challengeID, "nonce": nonce,
		"iat": now, "exp": now + 120,
	})
	signed := a.hdr + "." + base64.RawURLEncoding.EncodeToString(payload)
	var sig []byte
	if a.ed != nil {
		sig = ed25519.Sign(a.ed, []byte(signed))
	} else {
		sum := sha256.Sum256([]byte(signed))
		r, s, err := ecdsa.Sign(rand.Reader, a.ec, sum[:])
		if err != nil {
			panic(err)
		}
		sig = make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// site is the running server on a copy of the seeded store.
type site struct {
	*testserver.Server
	host     string
	secret   string
	attestor *attestor
	pid      int
	seed     SeedConfig
	owners   []int32
	boardLen int // bytes of the leaderboard's answer, and of /static-board's
}

// startSite copies the seeded store, starts Caddy on it and checks through the
// API that it serves the seeded data.
func startSite(t testing.TB, cfg SeedConfig, attestorKind string) *site {
	t.Helper()
	cache := seededStore(t, cfg)
	work := t.TempDir()
	start := time.Now()
	if err := copyStore(cache, filepath.Join(work, "palmgate")); err != nil {
		t.Fatalf("copying the seeded store: %v", err)
	}
	logf("copied the seeded store %s in %s", cache, time.Since(start).Round(time.Millisecond))
	return launchSite(t, cfg, attestorKind, work, "storage badger {datadir}/palmgate")
}

// launchSite starts Caddy with the storage line storage (data directory work)
// on a store already seeded with cfg, and checks through the API that it serves
// the seeded data.
func launchSite(t testing.TB, cfg SeedConfig, attestorKind, work, storage string) *site {
	t.Helper()
	s := &site{secret: randHex(16), attestor: newAttestor(t, attestorKind), seed: cfg, owners: cfg.Owners()}
	board, _ := json.Marshal(cfg.Leaderboard(s.owners, agent.DefaultLeaderboardLimit))
	s.boardLen = len(board) + 1 // the newline after the JSON
	cf := strings.NewReplacer("{attestor}", s.attestor.spki, "{secret}", s.secret, "{storage}", storage,
		"{boardbody}", strings.Repeat("x", s.boardLen)).Replace(caddyfile)
	start := time.Now()
	s.Server = testserver.Start(t, testserver.Options{Caddyfile: cf, DataDir: work})
	s.host = strings.TrimPrefix(s.URL, "http://")
	s.pid = loadgen.FindPID(s.ConfigPath)
	logf("caddy (pid %d) answers on %s after %s", s.pid, s.URL, time.Since(start).Round(time.Millisecond))
	if err := s.checkSeeded(); err != nil {
		t.Fatalf("the server does not serve the seeded data: %v", err)
	}
	return s
}

// seededStore returns the cached seeded Badger directory for cfg, seeding it
// first when it is missing or damaged: a directory without its "complete"
// marker (an interrupted seeding), or whose files differ from the marker's list.
func seededStore(t testing.TB, cfg SeedConfig) string {
	t.Helper()
	dir := filepath.Join(*seedCache, cfg.Dirname())
	store := filepath.Join(dir, "palmgate")
	if want, err := os.ReadFile(filepath.Join(dir, "complete")); err == nil {
		got, err := storeManifest(store)
		if err == nil && got == string(want) {
			return store
		}
		logf("the cached store %s differs from its manifest: seeding it again", store)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	logf("seeding %d humans and %d agents into %s (cached for later runs)", cfg.Humans, cfg.Agents, store)
	start := time.Now()
	last := start
	err := Seed(context.Background(), store, cfg, func(done int) {
		if time.Since(last) > 10*time.Second || done == cfg.Agents {
			last = time.Now()
			logf("  %d agents written (%.0f/s)", done, float64(done)/time.Since(start).Seconds())
		}
	})
	if err != nil {
		t.Fatalf("seeding: %v", err)
	}
	size, _ := dirSize(store)
	logf("seeded in %s; the store holds %.0f MiB", time.Since(start).Round(time.Second), float64(size)/(1<<20))
	manifest, err := storeManifest(store)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "complete"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return store
}

// copyStore copies a closed Badger directory, every file: hard links would not
// do, since Badger truncates an SSTable to zero before it deletes it after a
// compaction (ristretto's z.MmapFile.Delete), which would empty the cache's file.
func copyStore(from, to string) error {
	if err := os.MkdirAll(to, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || e.Name() == "LOCK" {
			continue
		}
		if err := copyFile(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// storeManifest lists the files of a Badger directory with their sizes, one
// "name size" line each: written into the cache's "complete" marker, and
// compared before every use, so a damaged cache is seeded again.
func storeManifest(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, e := range entries {
		if !e.Type().IsRegular() || e.Name() == "LOCK" {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s %d\n", e.Name(), info.Size())
	}
	return b.String(), nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if info, err := d.Info(); err == nil && d.Type().IsRegular() {
			n += info.Size()
		}
		return nil
	})
	return n, err
}

// get sends one GET on a fresh connection and returns the status and body.
func (s *site) get(path string, headers ...string) (int, []byte, error) {
	c, err := loadgen.Dial(s.host)
	if err != nil {
		return 0, nil, err
	}
	defer c.Close()
	code, _, body, err := c.Do(loadgen.GetRequest(s.host, path, headers...))
	return code, bytes.Clone(body), err
}

// checkSeeded checks through the API that the server sees the seeded records as
// core/agent wrote them: the top 100 and top 1000 of the leaderboard (and the
// agentCount sum of the top 100) as computed from the seed, and lookups and
// signature checks of sampled agents.
func (s *site) checkSeeded() error {
	for _, n := range []int{100, 1000} {
		path := "/v1/human/leaderboard"
		if n != 100 {
			path += "?limit=" + strconv.Itoa(n)
		}
		code, body, err := s.get(path)
		if err != nil || code != 200 {
			return fmt.Errorf("GET %s: %d %v", path, code, err)
		}
		var got []Entry
		if err := json.Unmarshal(body, &got); err != nil {
			return fmt.Errorf("GET %s: %v", path, err)
		}
		want := s.seed.Leaderboard(s.owners, n)
		if len(got) != len(want) {
			return fmt.Errorf("GET %s: %d entries, want %d", path, len(got), len(want))
		}
		var sumGot, sumWant int64
		for i := range want {
			// Registrations of an earlier scenario could only add agents: compare
			// only while the store is as seeded.
			if got[i] != want[i] {
				return fmt.Errorf("GET %s: entry %d is %+v, want %+v", path, i, got[i], want[i])
			}
			sumGot += got[i].AgentCount
			sumWant += want[i].AgentCount
		}
		if n == 100 && len(body) != s.boardLen {
			return fmt.Errorf("GET %s: %d bytes, but /static-board answers %d", path, len(body), s.boardLen)
		}
		if n == 100 {
			logf("leaderboard as seeded: top agentCount %d, agentCount sum of the top 100 %d (want %d), 100th has %d",
				got[0].AgentCount, sumGot, sumWant, got[99].AgentCount)
		}
	}
	for k := range 200 {
		i := (k*7919 + 13) * 4999 % s.seed.Agents
		key := AgentKey(i)
		pub := key.Public().(ed25519.PublicKey)
		want := fmt.Sprintf(`{"registered":true,"verified":true,"humanId":%q,"registeredAt":%q}`,
			HumanID(int(s.owners[i])), agent.Time(RegisteredAt(i)).Format())
		der, _ := x509.MarshalPKIXPublicKey(pub)
		for _, path := range []string{
			"/v1/agent/verify/device/" + url.PathEscape(DeviceID(i)),
			"/v1/agent/verify/public-key/" + base64.URLEncoding.EncodeToString(der),
		} {
			code, body, err := s.get(path)
			if err != nil || code != 200 || strings.TrimSpace(string(body)) != want {
				return fmt.Errorf("GET %s: %d %v %s, want %s", path, code, err, body, want)
			}
		}
	}
	c, err := loadgen.Dial(s.host)
	if err != nil {
		return err
	}
	defer c.Close()
	reg, unreg := verifyBodies(s.seed, s.owners, 1, 1, 0)
	for _, tc := range []struct {
		body []byte
		want string
	}{{reg[0], `{"verified":true,"registered":true}`}, {unreg[0], `{"verified":true,"registered":false}`}} {
		code, _, body, err := c.Do(loadgen.PostRequest(s.host, "/v1/agent/verify/signature", "application/json", tc.body))
		if err != nil || code != 200 || strings.TrimSpace(string(body)) != tc.want {
			return fmt.Errorf("POST /v1/agent/verify/signature: %d %v %s, want %s", code, err, body, tc.want)
		}
	}
	return nil
}

// verifyBodies returns AgentChallenge bodies for verify/signature: nreg signed
// by sampled seeded agents with their own deviceId, nunreg by fresh keys under
// deviceIds nobody registered. seq makes the messages differ between calls.
func verifyBodies(cfg SeedConfig, owners []int32, nreg, nunreg, seq int) (reg, unreg [][]byte) {
	now := time.Now().UnixMilli()
	body := func(deviceID string, key ed25519.PrivateKey, msg string) []byte {
		der, _ := x509.MarshalPKIXPublicKey(key.Public())
		b, _ := json.Marshal(map[string]any{
			"deviceId": deviceID, "publicKey": base64.StdEncoding.EncodeToString(der), "message": msg,
			"signature": base64.StdEncoding.EncodeToString(ed25519.Sign(key, []byte(msg))), "timestamp": now,
		})
		return b
	}
	reg, unreg = make([][]byte, nreg), make([][]byte, nunreg)
	parallel(nreg, func(k int) {
		i := int(uint64(k+seq*nreg) * 2654435761 % uint64(cfg.Agents)) // spread over all agents
		reg[k] = body(DeviceID(i), AgentKey(i), fmt.Sprintf("bench verify %d %d at %d", seq, k, now))
	})
	parallel(nunreg, func(k int) {
		_, key, _ := ed25519.GenerateKey(rand.Reader)
		unreg[k] = body(fmt.Sprintf("bench-unregistered-%d-%d", seq, k), key, fmt.Sprintf("bench verify %d %d at %d", seq, k, now))
	})
	return reg, unreg
}

// parallel runs f(0..n-1) on GOMAXPROCS goroutines.
func parallel(n int, f func(int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(1, procs()) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(i)
			}
		})
	}
	wg.Wait()
}

// mintCodes returns n authorization codes of distinct logins of seeded humans,
// each as the form body of its exchange: authorize (with PKCE), the login page
// (JSON), the bench attestor's assertion, the redirect back with the code.
func (s *site) mintCodes(n, workers int) ([][]byte, error) {
	return s.mintCodesOf(clientID, n, workers)
}

// mintCodesOf is mintCodes for the given client of the site.
func (s *site) mintCodesOf(client string, n, workers int) ([][]byte, error) {
	out := make([][]byte, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Go(func() {
			c, err := loadgen.Dial(s.host)
			if err != nil {
				errs[w] = err
				return
			}
			defer c.Close()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if out[i], err = s.mintCode(c, client, i); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

func (s *site) mintCode(c *loadgen.Conn, client string, i int) ([]byte, error) {
	verifier := randB64(32)
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{
		"response_type": {"code"}, "client_id": {client}, "redirect_uri": {redirectURI},
		"scope": {"openid offline_access"}, "state": {"st" + strconv.Itoa(i)}, "nonce": {"n-" + randHex(8)},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
	}
	code, loc, body, err := c.Do(loadgen.GetRequest(s.host, "/oauth2/authorize?"+q.Encode()))
	if err != nil || code != 302 || c.Cookie() == "" {
		return nil, fmt.Errorf("authorize: %d %v %q %.200s", code, err, c.Cookie(), body)
	}
	browser := "Cookie: " + c.Cookie() // the login's binding, as a browser keeps it
	verify := strings.TrimPrefix(loc, s.URL)
	code, _, body, err = c.Do(loadgen.GetRequest(s.host, verify, "Accept: application/json", browser))
	if err != nil || code != 200 {
		return nil, fmt.Errorf("login page: %d %v %.200s", code, err, body)
	}
	var page struct{ ChallengeID, Nonce string }
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, err
	}
	subject := PalmSubject(int(uint64(i) * 11400714819323198485 % uint64(s.seed.Humans)))
	if err := s.assert(c, page.ChallengeID, page.Nonce, subject); err != nil {
		return nil, err
	}
	code, loc, body, err = c.Do(loadgen.GetRequest(s.host, verify, browser))
	if err != nil || code != 302 || query(loc, "code") == "" {
		return nil, fmt.Errorf("back to the client: %d %v %s %.200s", code, err, loc, body)
	}
	return []byte(url.Values{
		"grant_type": {"authorization_code"}, "code": {query(loc, "code")}, "redirect_uri": {redirectURI},
		"code_verifier": {verifier}, "client_id": {client}, "client_secret": {s.secret},
	}.Encode()), nil
}

// assert completes a palm challenge with the bench attestor's assertion.
func (s *site) assert(c *loadgen.Conn, challengeID, nonce, subject string) error {
	body, _ := json.Marshal(map[string]string{"assertion": s.attestor.assertion(s.URL, challengeID, nonce, subject)})
	code, _, resp, err := c.Do(loadgen.PostRequest(s.host, "/v1/palm/challenges/"+challengeID+"/assertion", "application/json", body))
	if err != nil || code != 200 {
		return fmt.Errorf("assertion: %d %v %.200s", code, err, resp)
	}
	return nil
}

// registration is one prepared agent: its init body, signed just before the
// round (the timestamp must be within challenge_max_age).
type registration struct {
	deviceID string
	init     []byte
	subject  string
}

func newRegistration(cfg SeedConfig, run string, n int) registration {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(key.Public())
	ms := time.Now().UnixMilli()
	msg := fmt.Sprintf("bench%s%d-register-%d", run, n, ms)
	id := fmt.Sprintf("bench-reg-%s-%d", run, n)
	b, _ := json.Marshal(map[string]any{
		"deviceId": id, "publicKey": base64.StdEncoding.EncodeToString(der), "message": msg,
		"signature": base64.StdEncoding.EncodeToString(ed25519.Sign(key, []byte(msg))), "timestamp": ms,
	})
	return registration{deviceID: id, init: b, subject: PalmSubject(int(uint64(n) * 0x9E3779B97F4A7C15 % uint64(cfg.Humans)))}
}

// register runs one registration: init, the owner's page (as a phone gets it,
// for the scan URL the app opens), the palm engine's assertion.
// The agent is registered when the assertion is answered.
func (s *site) register(c *loadgen.Conn, r registration) error {
	code, _, body, err := c.Do(loadgen.PostRequest(s.host, "/v1/agent/register/init", "application/json", r.init))
	if err != nil || code != 201 {
		return fmt.Errorf("init: %d %v %.200s", code, err, body)
	}
	var sess struct{ SessionID string }
	if err := json.Unmarshal(body, &sess); err != nil {
		return err
	}
	code, _, body, err = c.Do(loadgen.GetRequest(s.host, "/v1/agent/register/"+sess.SessionID+"/verify", "User-Agent: "+testserver.PhoneUserAgent))
	if err != nil || code != 200 {
		return fmt.Errorf("owner's page: %d %v %.200s", code, err, body)
	}
	scan, err := url.Parse(testserver.AppLink(body))
	if err != nil || scan.Query().Get("nonce") == "" {
		return fmt.Errorf("owner's page: no app link in %.200s", body)
	}
	return s.assert(c, path.Base(scan.Path), scan.Query().Get("nonce"), r.subject)
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func randB64(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// query returns the query parameter name of a URL, or "".
func query(rawURL, name string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return u.Query().Get(name)
}

func logf(format string, args ...any) {
	fmt.Printf(time.Now().Format("15:04:05 ")+format+"\n", args...)
}
