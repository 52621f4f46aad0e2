package edge_test

// The harness of edge's fast tests: the server built as caddymodule builds it
// (core services, then edge.New), but over storage/memstore with a settable clock,
// and driven with httptest. The tests assert on the wire only (status, headers,
// JSON fields, pages), never on Go error types, so that they hold whatever the
// error plumbing inside edge looks like.

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/agent"
	corebearer "github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/edge"
	"github.com/palmgate/palmgate/internal/brand"
	"github.com/palmgate/palmgate/internal/clocktest"
	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/memstore"
	"github.com/palmgate/palmgate/storage/storagetest"
)

const (
	testIssuer      = "https://id.example.com"
	testClientID    = "app"
	testSecret      = "app-secret-0123456789abcdefghijklmnop"
	testRedirect    = "https://app.example.com/callback"
	testPostLogout  = "https://app.example.com/signed-out"
	testAttestor    = "test-engine"
	testRemoteAddr  = "192.0.2.10:4321"
	testUserAgent   = "Mozilla/5.0 (X11; Linux x86_64) Firefox/130.0"
	testPhoneAgent  = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) Mobile Safari/604.1"
	testPKCEVerifer = "a-code-verifier-of-at-least-43-characters-0123456789"
)

// testStart is the clock's starting time: the wall clock's, as edge itself reads
// the wall clock in places (the login cookie's Max-Age, the rate limit) and
// memstore's TTLs follow it.
var testStart = time.Now().UTC().Truncate(time.Millisecond)

// testAttestorKey is a fixed palm engine key: assertions the tests sign with it
// are trusted by the server (besides dev mode's built-in attestor).
var testAttestorKey = func() ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("edge test attestor"))
	return ed25519.NewKeyFromSeed(seed[:])
}()

// signingKeys are the store records of one key set (keys.Open's first start),
// generated once per test binary: RSA key generation is slow, and every server
// of these tests starts from a copy of them.
var signingKeys struct {
	once    sync.Once
	records map[string][]byte
	err     error
}

func keyRecords(t *testing.T) map[string][]byte {
	t.Helper()
	signingKeys.once.Do(func() {
		store := memstore.New()
		ctx := context.Background()
		if _, err := keys.Open(ctx, store, func() time.Time { return testStart }); err != nil {
			signingKeys.err = err
			return
		}
		signingKeys.records = map[string][]byte{}
		signingKeys.err = store.View(ctx, func(txn storage.Txn) error {
			for _, prefix := range []string{"keys/", "keylock/"} {
				err := txn.Iterate([]byte(prefix), func(k, v []byte) (bool, error) {
					signingKeys.records[string(k)] = v
					return true, nil
				})
				if err != nil {
					return err
				}
			}
			return nil
		})
	})
	if signingKeys.err != nil {
		t.Fatalf("generating the test signing keys: %v", signingKeys.err)
	}
	return signingKeys.records
}

// recorder is an answer of the server under test.
type recorder = httptest.ResponseRecorder

// testEnv is one palmgate edge over memstore, with its services and clock.
type testEnv struct {
	clock  *clocktest.Clock
	store  *storagetest.DownStore
	palm   *palm.Service
	agents *agent.Service
	oidc   *oidc.Service
	keys   *keys.Set
	srv    *edge.Server
}

type envOptions struct {
	rateLimit edge.RateLimit // zero: off
	noDev     bool
	// maxPending caps pending palm challenges per purpose (palm.Config.MaxPending).
	maxPending map[palm.Purpose]int
	// clients are configured besides the test client.
	clients []oidc.Client
	// ssoSession is oidc.Config.SSOSession (zero: off).
	ssoSession time.Duration
	// palmAppURL is edge.Config.PalmAppURL.
	palmAppURL string
	// registration and metadata are oidc.Config's Registration and ClientMetadata.
	registration oidc.RegistrationConfig
	metadata     oidc.MetadataFetcher
	// resources are the protected resources (oidc and edge Config.Resources).
	resources *corebearer.Resources
	// brand is edge.Config.Brand (zero: palmgate's own).
	brand brand.Brand
}

// newEnv builds the server the way caddymodule's App.Provision does.
func newEnv(t *testing.T, opts ...func(*envOptions)) *testEnv {
	t.Helper()
	o := envOptions{rateLimit: edge.RateLimit{Off: true}}
	for _, f := range opts {
		f(&o)
	}
	ctx := context.Background()
	mem := memstore.New()
	t.Cleanup(func() { _ = mem.Close() })
	records := keyRecords(t)
	if err := mem.Update(ctx, func(txn storage.Txn) error {
		for k, v := range records {
			if err := txn.Set([]byte(k), v, 0); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("copying the signing keys: %v", err)
	}
	store := &storagetest.DownStore{Store: mem}
	clock := clocktest.New(testStart)
	e := &testEnv{clock: clock, store: store}
	var err error
	e.palm, err = palm.NewService(palm.Config{
		Store: store, Now: clock.Now, Issuer: testIssuer, Dev: !o.noDev,
		Attestors:  []palm.Attestor{{Name: testAttestor, Key: testAttestorKey.Public()}},
		MaxPending: o.maxPending,
	})
	if err != nil {
		t.Fatalf("palm.NewService: %v", err)
	}
	e.agents = agent.NewService(agent.Config{
		Store: store, Palm: e.palm, Now: clock.Now, Issuer: testIssuer,
		SessionTTL: 15 * time.Minute, ChallengeMaxAge: 5 * time.Minute,
	})
	if e.keys, err = keys.Open(ctx, store, clock.Now); err != nil {
		t.Fatalf("keys.Open: %v", err)
	}
	e.oidc, err = oidc.NewService(ctx, oidc.Config{
		Store: store, Palm: e.palm, Keys: e.keys, Now: clock.Now, Issuer: testIssuer,
		PairwiseSecret: strings.Repeat("p", 32),
		Clients: append([]oidc.Client{{
			ID: testClientID, Secret: testSecret, Name: "Example App",
			RedirectURIs: []string{testRedirect}, PostLogoutRedirectURIs: []string{testPostLogout},
			Scopes: []string{"openid", "offline_access", "orders"},
		}}, o.clients...),
		SSOSession: o.ssoSession, Resources: o.resources,
		Registration: o.registration, ClientMetadata: o.metadata,
		Agents: e.agents,
	})
	if err != nil {
		t.Fatalf("oidc.NewService: %v", err)
	}
	// As the app wires them (caddymodule): removing an agent ends its grants.
	e.agents.OnRemoved(func(ctx context.Context, r agent.Removed) error {
		return e.oidc.RevokeAgentGrants(ctx, r.HumanID, r.DeviceID)
	})
	e.srv = edge.New(edge.Config{
		Issuer: testIssuer, Palm: e.palm, Agents: e.agents, OIDC: e.oidc, Keys: e.keys,
		RateLimit: o.rateLimit, Store: store, PalmAppURL: o.palmAppURL, Resources: o.resources, Brand: o.brand,
	})
	return e
}

func withRateLimit(requests int) func(*envOptions) {
	return func(o *envOptions) { o.rateLimit = edge.RateLimit{Requests: requests, Window: time.Hour} }
}

func withoutDev(o *envOptions) { o.noDev = true }

// req is a request to the server under test.
type req struct {
	method, target string
	body           string
	contentType    string
	header         http.Header
	cookies        []*http.Cookie
}

// do serves one request and returns the recorded answer.
func (e *testEnv) do(t *testing.T, rq req) *httptest.ResponseRecorder {
	t.Helper()
	var body io.Reader
	if rq.body != "" {
		body = strings.NewReader(rq.body)
	}
	r := httptest.NewRequest(rq.method, rq.target, body)
	r.RemoteAddr = testRemoteAddr
	r.Header.Set("User-Agent", testUserAgent)
	if rq.contentType != "" {
		r.Header.Set("Content-Type", rq.contentType)
	}
	for k, vs := range rq.header {
		r.Header[k] = vs
	}
	for _, c := range rq.cookies {
		r.AddCookie(c)
	}
	w := httptest.NewRecorder()
	e.srv.ServeHTTP(w, r)
	return w
}

func (e *testEnv) get(t *testing.T, target string) *httptest.ResponseRecorder {
	t.Helper()
	return e.do(t, req{method: http.MethodGet, target: target})
}

// getPage GETs target as a browser's navigation does (Accept text/html).
func (e *testEnv) getPage(t *testing.T, target string) *httptest.ResponseRecorder {
	t.Helper()
	return e.do(t, req{method: http.MethodGet, target: target, header: http.Header{"Accept": {browserAccept}}})
}

func (e *testEnv) getJSON(t *testing.T, target string, cookies ...*http.Cookie) *httptest.ResponseRecorder {
	t.Helper()
	return e.do(t, req{method: http.MethodGet, target: target, header: http.Header{"Accept": {"application/json"}}, cookies: cookies})
}

func (e *testEnv) postJSON(t *testing.T, target string, body any) *httptest.ResponseRecorder {
	t.Helper()
	b, ok := body.(string)
	if !ok {
		b = string(mustJSON(t, body))
	}
	return e.do(t, req{method: http.MethodPost, target: target, body: b, contentType: "application/json"})
}

func (e *testEnv) postForm(t *testing.T, target string, form url.Values, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	return e.do(t, req{method: http.MethodPost, target: target, body: form.Encode(), contentType: "application/x-www-form-urlencoded", header: header})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	return b
}

// decode reads the answer's JSON body, requiring its Content-Type.
func decode(t *testing.T, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type = %q, want application/json; body %s", ct, w.Body)
	}
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		t.Fatalf("body is not a JSON object: %v: %s", err, w.Body)
	}
	return m
}

func wantStatus(t *testing.T, w *httptest.ResponseRecorder, status int) {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status = %d, want %d; headers %v; body %s", w.Code, status, w.Header(), w.Body)
	}
}

// wantV1Error checks an answer in the /v1 dialect: the status, the body
// {"error","code","details"} with a non-empty message and the code, and, when
// field is not "", details.field.
func wantV1Error(t *testing.T, w *httptest.ResponseRecorder, status int, code, field string) map[string]any {
	t.Helper()
	wantStatus(t, w, status)
	m := decode(t, w)
	if msg, _ := m["error"].(string); msg == "" {
		t.Errorf("error message is empty: %s", w.Body)
	}
	if m["code"] != code {
		t.Errorf("code = %v, want %s; body %s", m["code"], code, w.Body)
	}
	if field != "" {
		details, _ := m["details"].(map[string]any)
		if details["field"] != field {
			t.Errorf("details.field = %v, want %s; body %s", details["field"], field, w.Body)
		}
	}
	return m
}

// wantOAuthError checks an answer in the OAuth dialect: the status and the body
// {"error","error_description"}.
func wantOAuthError(t *testing.T, w *httptest.ResponseRecorder, status int, code string) map[string]any {
	t.Helper()
	wantStatus(t, w, status)
	m := decode(t, w)
	if m["error"] != code {
		t.Errorf("error = %v, want %s; body %s", m["error"], code, w.Body)
	}
	if _, ok := m["code"]; ok {
		t.Errorf("an OAuth error body has a /v1 code: %s", w.Body)
	}
	return m
}

// wantRetryAfter checks that Retry-After is a whole number of seconds, at least 1.
func wantRetryAfter(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	v := w.Header().Get("Retry-After")
	if n, err := strconv.Atoi(v); err != nil || n < 1 {
		t.Errorf("Retry-After = %q, want a number of seconds ≥ 1", v)
	}
}

// wantPage checks an HTML page answer: status, type, and that it holds text.
func wantPage(t *testing.T, w *httptest.ResponseRecorder, status int, text string) {
	t.Helper()
	wantStatus(t, w, status)
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Fatalf("Content-Type = %q, want text/html; body %s", ct, w.Body)
	}
	if w.Header().Get("Content-Security-Policy") == "" {
		t.Error("the page has no Content-Security-Policy")
	}
	if !strings.Contains(w.Body.String(), text) {
		t.Errorf("the page lacks %q:\n%s", text, w.Body)
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
