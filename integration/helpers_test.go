// Package integration tests the palmgate build of Caddy from the outside: a real
// process started with a Caddyfile by internal/testserver, driven over HTTP.
package integration

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/pgtest"
	"github.com/palmgate/palmgate/internal/testserver"
)

func TestMain(m *testing.M) { testserver.Main(m, pgtest.Cleanup, removeOldCaddy) }

var (
	uuidRE  = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	timeRE  = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$`)
	nonceRE = regexp.MustCompile(`^[A-Za-z0-9_-]{22,}$`) // base64url, 128 bits or more
	// fingerprintRE is the short key fingerprint examples/agent prints.
	fingerprintRE = regexp.MustCompile(`^[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}$`)
)

// env is a running server plus the checks every response of a test gets: no
// response body may contain a raw palm subject the test sent.
type env struct {
	*testserver.Server
	mu      sync.Mutex
	secrets []string
}

func start(t *testing.T, opts testserver.Options) *env {
	t.Helper()
	return &env{Server: testserver.Start(t, opts)}
}

// subject returns a fresh raw palm subject and remembers it as a secret that no
// response may reveal.
func (e *env) subject(name string) string {
	s := fmt.Sprintf("palm-subject-%s-%s", name, randHex(6))
	testserver.Sensitive("palm subject", s) // no log may hold it either
	e.mu.Lock()
	e.secrets = append(e.secrets, s)
	e.mu.Unlock()
	return s
}

// do sends a request to path (relative to the server URL, or absolute) and
// checks that the response leaks no palm subject.
func (e *env) do(t *testing.T, method, path string, body any, headers ...string) *testserver.Response {
	t.Helper()
	u := path
	if strings.HasPrefix(path, "/") {
		u = e.URL + path
	}
	resp := testserver.Do(t, method, u, body, headers...)
	e.mu.Lock()
	secrets := append([]string(nil), e.secrets...)
	e.mu.Unlock()
	for _, s := range secrets {
		if strings.Contains(string(resp.Body), s) {
			t.Errorf("%s: the response reveals the raw palm subject %q:\n%s", resp.Request, s, testserver.Snippet(resp.Body))
		}
	}
	return resp
}

// agent is an Ed25519 agent identity.
type agent struct {
	deviceID string
	priv     ed25519.PrivateKey
	der      []byte // DER SPKI of the public key
	pub      string // standard base64 of der
}

// newAgent makes an agent whose standard base64 key contains '+' or '/', so that
// key lookups exercise path escaping and base64url.
func newAgent(t *testing.T, deviceID string) *agent {
	t.Helper()
	for {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		enc := base64.StdEncoding.EncodeToString(der)
		if strings.ContainsAny(enc, "+/") {
			return &agent{deviceID: deviceID, priv: priv, der: der, pub: enc}
		}
	}
}

// sign builds an AgentChallenge body for message and timestamp.
func (a *agent) sign(message string, ts int64) map[string]any {
	return map[string]any{
		"deviceId":  a.deviceID,
		"publicKey": a.pub,
		"message":   message,
		"signature": base64.StdEncoding.EncodeToString(ed25519.Sign(a.priv, []byte(message))),
		"timestamp": ts,
	}
}

var prefixSeq atomic.Int64

// registration builds a registration challenge stamped at, with a message
// `<unique prefix>-register-<ms>` never used before in this process.
func (a *agent) registration(at time.Time) map[string]any {
	ms := at.UnixMilli()
	return a.sign(fmt.Sprintf("agent%d-register-%d", prefixSeq.Add(1), ms), ms)
}

// urlKey is the agent's key in base64url, with padding.
func (a *agent) urlKey() string { return base64.URLEncoding.EncodeToString(a.der) }

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// session is the answer of a successful init.
type session struct {
	ID        string
	URL       string
	ExpiresAt string
}

// initSession posts a registration challenge and expects 201 with a well-formed
// session.
func (e *env) initSession(t *testing.T, body any) session {
	t.Helper()
	resp := e.do(t, "POST", "/v1/agent/register/init", body).ExpectStatus(t, http.StatusCreated)
	m := resp.Object(t)
	s := session{ID: str(m["sessionId"]), URL: str(m["registrationUrl"]), ExpiresAt: str(m["expiresAt"])}
	if !uuidRE.MatchString(s.ID) {
		t.Fatalf("init: sessionId %q is not a uuid: %s", s.ID, resp.Body)
	}
	if want := e.URL + "/v1/agent/register/" + s.ID + "/verify"; s.URL != want {
		t.Errorf("init: registrationUrl %q, want %q", s.URL, want)
	}
	if !timeRE.MatchString(s.ExpiresAt) {
		t.Errorf("init: expiresAt %q is not RFC 3339 UTC with milliseconds", s.ExpiresAt)
	}
	return s
}

// challengeInfo is the JSON form of the owner's registration page, with the
// nonce and scan URL that only the page itself (its QR code, or the app link a
// phone gets) carries.
type challengeInfo struct {
	SessionID      string `json:"sessionId"`
	DeviceID       string `json:"deviceId"`
	KeyFingerprint string `json:"keyFingerprint"`
	ChallengeID    string `json:"challengeId"`
	Nonce          string `json:"nonce"`
	ScanURL        string `json:"scanUrl"`
	ScanExpiresAt  string `json:"scanExpiresAt"`
	Status         string `json:"status"`
	ExpiresAt      string `json:"expiresAt"`
}

// verifyInfo reads the owner's page of s as JSON and checks its shape; while the
// challenge is pending, it reads the scan URL from the page a phone is shown.
func (e *env) verifyInfo(t *testing.T, s session) challengeInfo {
	t.Helper()
	resp := e.do(t, "GET", e.URL+"/v1/agent/register/"+s.ID+"/verify", nil, "Accept", "application/json").ExpectStatus(t, http.StatusOK)
	var c challengeInfo
	resp.Decode(t, &c)
	if c.SessionID != s.ID {
		t.Errorf("verify page: sessionId %q, want %q", c.SessionID, s.ID)
	}
	if !uuidRE.MatchString(c.ChallengeID) {
		t.Fatalf("verify page: challengeId %q is not a uuid: %s", c.ChallengeID, resp.Body)
	}
	if c.Nonce != "" || c.ScanURL != "" {
		t.Errorf("verify page JSON reveals the nonce or the scan URL (anyone holding the URL could deny): %s", resp.Body)
	}
	if !timeRE.MatchString(c.ExpiresAt) || !timeRE.MatchString(c.ScanExpiresAt) {
		t.Errorf("verify page: expiresAt %q or scanExpiresAt %q is not RFC 3339 UTC with milliseconds", c.ExpiresAt, c.ScanExpiresAt)
	}
	if !fingerprintRE.MatchString(c.KeyFingerprint) {
		t.Errorf("verify page: keyFingerprint %q is not the short key fingerprint", c.KeyFingerprint)
	}
	if c.Status == "pending" {
		c.ScanURL = e.appLink(t, s.URL)
		prefix := e.URL + "/v1/palm/challenges/" + c.ChallengeID + "?nonce="
		nonce, ok := strings.CutPrefix(c.ScanURL, prefix)
		if !ok || !nonceRE.MatchString(nonce) {
			t.Fatalf("verify page: app link %q, want %s<base64url nonce>", c.ScanURL, prefix)
		}
		c.Nonce = nonce
	}
	return c
}

// parseScanURL reads the challenge id and nonce of a scan URL.
func parseScanURL(scanURL string) (challengeInfo, bool) {
	u, err := url.Parse(scanURL)
	if err != nil {
		return challengeInfo{}, false
	}
	id, ok := strings.CutPrefix(u.Path, "/v1/palm/challenges/")
	c := challengeInfo{ChallengeID: id, Nonce: u.Query().Get("nonce"), ScanURL: scanURL}
	return c, ok && uuidRE.MatchString(id) && nonceRE.MatchString(c.Nonce)
}

// newJar is a cookie jar: the login cookie of a client that acts as a browser.
func newJar() http.CookieJar {
	jar, _ := cookiejar.New(nil) // never fails without options
	return jar
}

// appLink reads the page at pageURL as a phone would and returns the app link
// (the scan URL) it offers.
func (e *env) appLink(t *testing.T, pageURL string) string {
	t.Helper()
	resp := e.do(t, "GET", pageURL, nil, "User-Agent", testserver.PhoneUserAgent).ExpectStatus(t, http.StatusOK)
	link := testserver.AppLink(resp.Body)
	if link == "" {
		t.Fatalf("%s: no app link on the page a phone gets:\n%s", resp.Request, testserver.Snippet(resp.Body))
	}
	if qrImgRE.Match(resp.Body) {
		t.Errorf("%s: the page a phone gets shows a QR code; it should offer the app link instead", resp.Request)
	}
	return link
}

// devScan completes a challenge with the dev-mode simulated palm scan.
func (e *env) devScan(t *testing.T, c challengeInfo, subject string) *testserver.Response {
	t.Helper()
	return e.do(t, "POST", "/v1/palm/challenges/"+c.ChallengeID+"/dev-scan", map[string]any{"nonce": c.Nonce, "palmSubject": subject})
}

// challenge reads a palm challenge through its scan URL.
func (e *env) challenge(t *testing.T, c challengeInfo) map[string]any {
	t.Helper()
	return e.do(t, "GET", c.ScanURL, nil).ExpectStatus(t, http.StatusOK).Object(t)
}

// challengeStatus is the status of a palm challenge read through its scan URL.
func (e *env) challengeStatus(t *testing.T, c challengeInfo) string {
	t.Helper()
	return str(e.challenge(t, c)["status"])
}

// status polls a registration session and expects 200.
func (e *env) status(t *testing.T, sessionID string) map[string]any {
	t.Helper()
	return e.do(t, "GET", "/v1/agent/register/"+sessionID+"/status", nil).ExpectStatus(t, http.StatusOK).Object(t)
}

// registered is the outcome of a completed registration.
type registered struct {
	session      session
	challenge    challengeInfo
	humanID      string
	registeredAt string
}

// register runs the whole flow for a: init, owner's page, dev-scan as subject,
// and checks the completed status and the device lookup.
func (e *env) register(t *testing.T, a *agent, subject string) registered {
	t.Helper()
	s := e.initSession(t, a.registration(time.Now()))
	c := e.verifyInfo(t, s)
	if m := e.devScan(t, c, subject).ExpectStatus(t, http.StatusOK).Object(t); str(m["status"]) != "verified" {
		t.Fatalf("dev-scan: status %v, want verified", m["status"])
	}
	st := e.status(t, s.ID)
	if str(st["status"]) != "completed" || str(st["deviceId"]) != a.deviceID {
		t.Fatalf("status after the scan: %v, want completed for %q", st, a.deviceID)
	}
	reg, _ := st["registration"].(map[string]any)
	if str(reg["publicKey"]) != a.pub || !timeRE.MatchString(str(reg["registeredAt"])) {
		t.Errorf("status registration %v, want publicKey %q and registeredAt in RFC 3339 millis", reg, a.pub)
	}
	l := e.lookupDevice(t, a.deviceID)
	if !l.Registered || !l.Verified || !uuidRE.MatchString(l.HumanID) {
		t.Fatalf("device lookup after registration: %+v", l)
	}
	if l.RegisteredAt != str(reg["registeredAt"]) {
		t.Errorf("device lookup registeredAt %q, status says %q", l.RegisteredAt, reg["registeredAt"])
	}
	return registered{session: s, challenge: c, humanID: l.HumanID, registeredAt: l.RegisteredAt}
}

// lookup is an agent lookup result.
type lookup struct {
	Registered   bool
	Verified     bool
	HumanID      string
	RegisteredAt string
}

func (e *env) lookupDevice(t *testing.T, deviceID string) lookup {
	t.Helper()
	return e.lookupPath(t, "/v1/agent/verify/device/"+url.PathEscape(deviceID))
}

// lookupKey looks an agent up by key, given as it goes in the path (escaped).
func (e *env) lookupKey(t *testing.T, pathKey string) lookup {
	t.Helper()
	return e.lookupPath(t, "/v1/agent/verify/public-key/"+pathKey)
}

func (e *env) lookupPath(t *testing.T, path string) lookup {
	t.Helper()
	resp := e.do(t, "GET", path, nil).ExpectStatus(t, http.StatusOK)
	m := resp.Object(t)
	reg, ok1 := m["registered"].(bool)
	ver, ok2 := m["verified"].(bool)
	at, ok3 := m["registeredAt"].(string)
	if !ok1 || !ok2 || !ok3 {
		t.Fatalf("GET %s: want booleans registered and verified and a string registeredAt: %s", path, resp.Body)
	}
	l := lookup{Registered: reg, Verified: ver, HumanID: str(m["humanId"]), RegisteredAt: at}
	if reg {
		if !uuidRE.MatchString(l.HumanID) || !timeRE.MatchString(at) {
			t.Errorf("GET %s: registered agent needs a uuid humanId and an RFC 3339 millis registeredAt: %s", path, resp.Body)
		}
	} else if ver || at != "never" || l.HumanID != "" {
		t.Errorf("GET %s: unknown agent must answer verified:false, registeredAt:\"never\" and no humanId: %s", path, resp.Body)
	}
	return l
}

// expectUnregistered checks that neither the device nor the key of a is registered.
func (e *env) expectUnregistered(t *testing.T, a *agent) {
	t.Helper()
	if l := e.lookupDevice(t, a.deviceID); l.Registered {
		t.Errorf("device %q: registered, want not registered: %+v", a.deviceID, l)
	}
	if l := e.lookupKey(t, url.PathEscape(a.pub)); l.Registered {
		t.Errorf("key of device %q: registered, want not registered: %+v", a.deviceID, l)
	}
}

// entry is a leaderboard entry.
type entry struct {
	HumanID              string `json:"humanId"`
	AgentCount           int    `json:"agentCount"`
	EarliestRegisteredAt string `json:"earliestRegisteredAt"`
}

// leaderboard reads the leaderboard (query is "" or "?limit=N") and checks the
// entries' shape and order.
func (e *env) leaderboard(t *testing.T, query string) []entry {
	t.Helper()
	resp := e.do(t, "GET", "/v1/human/leaderboard"+query, nil).ExpectStatus(t, http.StatusOK)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("leaderboard: Content-Type %q, want application/json", ct)
	}
	var es []entry
	resp.Decode(t, &es)
	if es == nil {
		t.Fatalf("leaderboard: want a JSON array, got %s", resp.Body)
	}
	for i, x := range es {
		if !uuidRE.MatchString(x.HumanID) || x.AgentCount < 1 || !timeRE.MatchString(x.EarliestRegisteredAt) {
			t.Errorf("leaderboard entry %d malformed: %+v", i, x)
		}
		if i > 0 && !ranksBefore(es[i-1], x) {
			t.Errorf("leaderboard entries %d and %d out of order: %+v then %+v", i-1, i, es[i-1], x)
		}
	}
	return es
}

// ranksBefore is the leaderboard order: agentCount desc, earliestRegisteredAt
// asc, humanId asc. (The time format sorts as text.)
func ranksBefore(a, b entry) bool {
	if a.AgentCount != b.AgentCount {
		return a.AgentCount > b.AgentCount
	}
	if a.EarliestRegisteredAt != b.EarliestRegisteredAt {
		return a.EarliestRegisteredAt < b.EarliestRegisteredAt
	}
	return a.HumanID < b.HumanID
}

func totalAgents(es []entry) int {
	n := 0
	for _, x := range es {
		n += x.AgentCount
	}
	return n
}

// str returns v if it is a string, else "".
func str(v any) string {
	s, _ := v.(string)
	return s
}

// parseTime parses an RFC 3339 time, failing the test if it does not parse.
func parseTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	return tm
}

// between fails unless got lies in [from, to]: from and to bracket the
// requests that made got, so the check holds however long they took. grain is
// the precision got was written with (a JWT's seconds, a record's
// milliseconds): got may be from truncated to it.
func between(t *testing.T, what string, got, from, to time.Time, grain time.Duration) {
	t.Helper()
	if got.Before(from.Truncate(grain)) || got.After(to) {
		t.Errorf("%s = %s, want it between %s and %s", what, got.Format(time.RFC3339Nano), from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano))
	}
}
