package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
)

// Abuse limits: the per-IP rate limit of unauthenticated writes, the cap on
// pending registration sessions per deviceId, body sizes, and the security
// headers of the pages.

// limServer starts a dev palmgate with the client shop and the global lines.
func limServer(t *testing.T, shop oidcClient, lines ...string) *env {
	t.Helper()
	return start(t, testserver.Options{Global: strings.Join(append(lines, shop.config()), "\n")})
}

// expectRateLimited checks a 429 in the dialect of the route (the /v1 error body
// with code rate_limited, or OAuth's temporarily_unavailable under /oauth2) and
// a Retry-After of whole seconds from 1 to maxWait.
func expectRateLimited(t *testing.T, r *testserver.Response, maxWait int) {
	t.Helper()
	if _, path, _ := strings.Cut(r.Request, " "); strings.Contains(path, "/oauth2/") {
		expectOAuthError(t, r, http.StatusTooManyRequests, "temporarily_unavailable")
	} else {
		r.ExpectError(t, http.StatusTooManyRequests, "rate_limited", "")
	}
	ra := r.Header.Values("Retry-After")
	if len(ra) != 1 {
		t.Errorf("%s: Retry-After %q, want one value", r.Request, ra)
		return
	}
	n, err := strconv.Atoi(ra[0])
	if err != nil || n < 1 || n > maxWait || strconv.Itoa(n) != ra[0] {
		t.Errorf("%s: Retry-After %q, want whole seconds from 1 to %d", r.Request, ra[0], maxWait)
	}
}

// expectAdmitted fails if r was refused by the rate limit (or is a server fault).
func expectAdmitted(t *testing.T, r *testserver.Response) {
	t.Helper()
	if r.Status == http.StatusTooManyRequests || r.Status >= 500 {
		t.Errorf("%s: status %d, want it admitted by the rate limit\nbody: %s", r.Request, r.Status, testserver.Snippet(r.Body))
	}
}

// limRequest is a request for e.do.
type limRequest struct {
	name, method, path string
	body               any
	header             []string
}

// limitedRequests are one request of each rate-limited kind, each invalid (so
// that an admitted one changes nothing), against server e.
func limitedRequests(e *env, shop oidcClient) []limRequest {
	unknown := "/v1/palm/challenges/7a1f9c64-3b0e-4c55-8a63-000000000000"
	form := []string{"Content-Type", "application/x-www-form-urlencoded"}
	return []limRequest{
		{"init", "POST", "/v1/agent/register/init", map[string]any{}, nil},
		{"authorize GET", "GET", strings.TrimPrefix(e.authURL(shop, "client_id", "nobody"), e.URL), nil, nil},
		{"authorize POST", "POST", "/oauth2/authorize", "client_id=nobody", form},
		{"assertion", "POST", unknown + "/assertion", map[string]any{"assertion": "x.y.z"}, nil},
		{"deny", "POST", unknown + "/deny", map[string]any{"nonce": "x"}, nil},
		{"dev-scan", "POST", unknown + "/dev-scan", map[string]any{"nonce": "x", "palmSubject": "eve"}, nil},
	}
}

// TestLimitsRateLimitInit: with `rate_limit 5 1m`, five inits (invalid ones
// count: they are unauthenticated writes) empty the client's bucket; the sixth
// and every other limited endpoint answer 429 with Retry-After, while lookups
// and reads are never limited.
func TestLimitsRateLimitInit(t *testing.T) {
	t.Parallel()
	shop := newOIDCClient("shop", "")
	e := limServer(t, shop, "rate_limit 5 1m")
	for i := 1; i <= 5; i++ {
		e.do(t, "POST", "/v1/agent/register/init", map[string]any{"deviceId": "x"}).ExpectError(t, http.StatusBadRequest, "missing_field", "publicKey")
	}
	expectRateLimited(t, e.do(t, "POST", "/v1/agent/register/init", map[string]any{"deviceId": "x"}), 12)
	// A valid init is refused too: the limit comes before any work.
	a := newAgent(t, "limited-agent")
	expectRateLimited(t, e.do(t, "POST", "/v1/agent/register/init", a.registration(time.Now())), 12)
	for _, r := range limitedRequests(e, shop) {
		expectRateLimited(t, e.do(t, r.method, r.path, r.body, r.header...), 12)
	}
	// The token endpoint counts failures: with no request left, it refuses too.
	expectRateLimited(t, e.postToken(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"x"},
		"client_id": {shop.id}, "client_secret": {shop.secret}}), 12)

	// Lookups and reads are not limited, however many.
	reads := []string{
		"/v1/human/leaderboard", "/v1/agent/verify/device/limited-agent", "/v1/agent/verify/public-key/" + a.urlKey(),
		"/v1/agent/register/5b0f2d7e-91c3-4c1e-8d2a-000000000000/status",
		"/v1/palm/challenges/5b0f2d7e-91c3-4c1e-8d2a-000000000000?nonce=x",
		"/oauth2/jwks", "/oauth2/.well-known/openid-configuration", "/oauth2/verify?auth_request_id=x",
	}
	for i := 0; i < 5; i++ {
		for _, p := range reads {
			expectAdmitted(t, e.do(t, "GET", p, nil))
		}
		expectAdmitted(t, e.do(t, "POST", "/v1/agent/verify/signature", a.registration(time.Now())).ExpectStatus(t, http.StatusOK))
	}
	if l := e.lookupDevice(t, a.deviceID); l.Registered {
		t.Errorf("the refused init registered %q", a.deviceID)
	}
}

// TestLimitsRateLimitSharedBucket: authorize (GET and POST), assertion, deny and
// dev-scan take from the same per-IP bucket as init.
func TestLimitsRateLimitSharedBucket(t *testing.T) {
	t.Parallel()
	shop := newOIDCClient("shop", "")
	e := limServer(t, shop, "rate_limit 5 1m")
	reqs := limitedRequests(e, shop)[1:] // all but init: five requests
	if len(reqs) != 5 {
		t.Fatalf("want five limited requests besides init, have %d", len(reqs))
	}
	for _, r := range reqs {
		resp := e.do(t, r.method, r.path, r.body, r.header...)
		if resp.Status < 400 || resp.Status == http.StatusTooManyRequests || resp.Status >= 500 {
			t.Errorf("%s: status %d, want its own 4xx refusal (the bucket still has requests)\nbody: %s", r.name, resp.Status, resp.Body)
		}
	}
	// If any of the five did not count, init would still be admitted.
	expectRateLimited(t, e.do(t, "POST", "/v1/agent/register/init", map[string]any{}), 12)
	for _, r := range reqs {
		expectRateLimited(t, e.do(t, r.method, r.path, r.body, r.header...), 12)
	}
}

// limDoFrom sends a request as testserver.Do does, from the local address ip
// (any 127.0.0.0/8 address reaches the server on Linux), so that one test can
// be several clients of the per-IP limit.
func limDoFrom(t *testing.T, ip string, e *env, r limRequest) *testserver.Response {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	client := &http.Client{
		Timeout:       20 * time.Second,
		Transport:     &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	var body io.Reader
	switch b := r.body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequest(r.method, e.URL+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(r.header); i += 2 {
		req.Header.Set(r.header[i], r.header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s from %s: %v", r.method, r.path, ip, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &testserver.Response{Status: resp.StatusCode, Header: resp.Header, Body: data,
		Request: fmt.Sprintf("%s %s from %s", r.method, r.path, ip)}
}

// TestLimitsRateLimitPerEndpoint: each limited endpoint alone admits five
// requests of a client and refuses the sixth, and the bucket is per client IP:
// one address out of requests does not limit another.
func TestLimitsRateLimitPerEndpoint(t *testing.T) {
	t.Parallel()
	shop := newOIDCClient("shop", "")
	e := limServer(t, shop, "rate_limit 5 1m")
	reqs := limitedRequests(e, shop)
	for i, r := range reqs {
		ip := fmt.Sprintf("127.0.0.%d", 10+i)
		for n := 1; n <= 5; n++ {
			resp := limDoFrom(t, ip, e, r)
			if resp.Status < 400 || resp.Status == http.StatusTooManyRequests || resp.Status >= 500 {
				t.Errorf("%s, request %d: status %d, want its own 4xx refusal\nbody: %s", resp.Request, n, resp.Status, resp.Body)
			}
		}
		expectRateLimited(t, limDoFrom(t, ip, e, r), 12)
		// Another address still has its whole bucket.
		expectAdmitted(t, limDoFrom(t, fmt.Sprintf("127.0.0.%d", 100+i), e, r))
	}
	// Every address above is out of requests for every limited endpoint.
	for i := range reqs {
		expectRateLimited(t, limDoFrom(t, fmt.Sprintf("127.0.0.%d", 10+i), e, reqs[(i+1)%len(reqs)]), 12)
	}
}

// TestLimitsRateLimitToken: successful token, introspection and revocation
// calls do not take from the bucket; failed ones do, and an empty bucket
// refuses even a valid call.
func TestLimitsRateLimitToken(t *testing.T) {
	t.Parallel()
	shop := newOIDCClient("shop", "")
	e := limServer(t, shop, "rate_limit 5 1m")
	// A login costs two requests (authorize and the scan): three remain.
	code, _ := e.codeFor(t, shop, e.subject("alice"), false)
	refresh := str(e.exchange(t, shop, code, "")["refresh_token"])
	auth := url.Values{"client_id": {shop.id}, "client_secret": {shop.secret}}
	with := func(kv ...string) url.Values {
		v := url.Values{}
		for k, vs := range auth {
			v[k] = vs
		}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	var access string
	for i := 0; i < 10; i++ {
		m := e.postToken(t, with("grant_type", "refresh_token", "refresh_token", refresh)).ExpectStatus(t, http.StatusOK).Object(t)
		refresh, access = str(m["refresh_token"]), str(m["access_token"])
	}
	for i := 0; i < 3; i++ {
		e.do(t, "POST", "/oauth2/introspect", with("token", access).Encode(), "Content-Type", "application/x-www-form-urlencoded").ExpectStatus(t, http.StatusOK)
		e.do(t, "POST", "/oauth2/revoke", with("token", "not-a-token").Encode(), "Content-Type", "application/x-www-form-urlencoded").ExpectStatus(t, http.StatusOK)
	}
	// Three failures empty the bucket.
	bad := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "client_id": {shop.id}, "client_secret": {"wrong"}}
	for i := 0; i < 3; i++ {
		expectOAuthError(t, e.postToken(t, bad), http.StatusUnauthorized, "invalid_client")
	}
	expectRateLimited(t, e.postToken(t, with("grant_type", "refresh_token", "refresh_token", refresh)), 12)
	expectRateLimited(t, e.postToken(t, bad), 12)
	expectRateLimited(t, e.do(t, "POST", "/oauth2/introspect", with("token", access).Encode(), "Content-Type", "application/x-www-form-urlencoded"), 12)
	expectRateLimited(t, e.do(t, "POST", "/v1/agent/register/init", map[string]any{}), 12)
	// The refused refresh did not rotate the token: it is still the current one
	// (a reuse would have revoked the family, and this access token with it).
	e.expectUserinfo(t, access, str(jwtPart(t, access, 1)["sub"]))
}

// TestLimitsRateLimitOff: `rate_limit off` never limits.
func TestLimitsRateLimitOff(t *testing.T) {
	t.Parallel()
	shop := newOIDCClient("shop", "")
	e := limServer(t, shop, "rate_limit off")
	for i := 0; i < 50; i++ {
		expectAdmitted(t, e.do(t, "POST", "/v1/agent/register/init", map[string]any{"deviceId": "x"}))
	}
	bad := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"x"}, "client_id": {shop.id}, "client_secret": {"wrong"}}
	for i := 0; i < 30; i++ {
		expectOAuthError(t, e.postToken(t, bad), http.StatusUnauthorized, "invalid_client")
	}
	for _, r := range limitedRequests(e, shop) {
		for i := 0; i < 10; i++ {
			expectAdmitted(t, e.do(t, r.method, r.path, r.body, r.header...))
		}
	}
	// And a real registration still goes through after all that.
	e.register(t, newAgent(t, "unlimited-agent"), e.subject("owner"))
}

// TestLimitsRateLimitRefill: with `rate_limit 2 10s` the bucket holds two
// requests and refills within the window. The window is long enough that on a
// loaded machine the refill does not keep up with a burst (one request every 5 s).
func TestLimitsRateLimitRefill(t *testing.T) {
	t.Parallel()
	shop := newOIDCClient("shop", "")
	const window = 10 * time.Second
	e := limServer(t, shop, fmt.Sprintf("rate_limit 2 %s", window))
	post := func() *testserver.Response {
		return e.do(t, "POST", "/v1/agent/register/init", map[string]any{"deviceId": "x"})
	}
	burst := func(round string) {
		t.Helper()
		for i := 0; i < 2; i++ { // a full bucket holds two
			if r := post(); r.Status != http.StatusBadRequest {
				t.Fatalf("%s: request %d: status %d, want 400 (admitted)\nbody: %s", round, i+1, r.Status, r.Body)
			}
		}
		// The next one is refused, unless the machine is so slow that half a
		// window passed; then one of the next two is.
		for i := 0; ; i++ {
			r := post()
			if r.Status == http.StatusTooManyRequests {
				expectRateLimited(t, r, int(window/time.Second)/2)
				return
			}
			if i == 2 {
				t.Fatalf("%s: no 429 after %d requests in a burst; last status %d", round, i+3, r.Status)
			}
		}
	}
	burst("first burst")
	time.Sleep(window + 100*time.Millisecond)
	burst("after a window")
}

// TestLimitsPendingSessions: a (deviceId, key) has at most 32 pending
// registration sessions; ending one frees a place.
func TestLimitsPendingSessions(t *testing.T) {
	t.Parallel()
	e := start(t, testserver.Options{Global: "rate_limit off"})
	a := newAgent(t, "capped-agent")
	var sessions []session
	for i := 0; i < 32; i++ {
		sessions = append(sessions, e.initSession(t, a.registration(time.Now())))
	}
	// One count record per (deviceId, key), whatever its number of sessions.
	if n := storeCounts(t, e)["agent/pg"]; n != 1 {
		t.Errorf("pending-count records: %d, want 1", n)
	}
	full := func() {
		t.Helper()
		e.do(t, "POST", "/v1/agent/register/init", a.registration(time.Now())).ExpectError(t, http.StatusTooManyRequests, "too_many_pending_sessions", "")
	}
	full()
	full()
	// The cap is per (deviceId, key): sessions opened for a deviceId under
	// throwaway keys do not lock out the agent's real key, nor does the same key
	// under another id.
	e.initSession(t, newAgent(t, "capped-agent").registration(time.Now()))
	b := *a
	b.deviceID = "capped-agent-2"
	other := e.initSession(t, b.registration(time.Now()))

	// A denied session frees its place: one more init, then full again.
	c := e.verifyInfo(t, sessions[0])
	e.do(t, "POST", "/v1/palm/challenges/"+c.ChallengeID+"/deny", map[string]any{"nonce": c.Nonce}).ExpectStatus(t, http.StatusOK)
	if st := e.status(t, sessions[0].ID); str(st["status"]) != "failed" {
		t.Errorf("denied session: status %v, want failed", st["status"])
	}
	sessions = append(sessions[1:], e.initSession(t, a.registration(time.Now())))
	full()

	// A completed session leaves its count too: capped-agent-2's, whose only
	// session it was, is deleted. The device is then registered, so a further
	// init is 409, not 429.
	before := storeCounts(t, e)["agent/pg"]
	c = e.verifyInfo(t, other)
	e.devScan(t, c, e.subject("owner")).ExpectStatus(t, http.StatusOK)
	if st := e.status(t, other.ID); str(st["status"]) != "completed" {
		t.Fatalf("scanned session: status %v, want completed", st["status"])
	}
	if after := storeCounts(t, e)["agent/pg"]; after != before-1 {
		t.Errorf("pending-count records %d after the completion of a count's only session, want %d", after, before-1)
	}
	e.do(t, "POST", "/v1/agent/register/init", b.registration(time.Now())).ExpectError(t, http.StatusConflict, "already_registered", "")
	// capped-agent's key is now registered (to capped-agent-2).
	e.do(t, "POST", "/v1/agent/register/init", a.registration(time.Now())).ExpectError(t, http.StatusConflict, "already_registered", "")
}

// TestLimitsBodySize: bodies over 64 KiB are 413 at every endpoint that reads
// one, with the endpoint's error body; 64 KiB exactly is read.
func TestLimitsBodySize(t *testing.T) {
	t.Parallel()
	shop := newOIDCClient("shop", "")
	e := limServer(t, shop, "rate_limit off")
	_, _, c := e.pending(t, "sized-agent")
	chal := "/v1/palm/challenges/" + c.ChallengeID
	// jsonOf is a JSON object of exactly n bytes.
	jsonOf := func(n int) []byte {
		b := []byte(`{"pad":"` + strings.Repeat("p", n-10) + `"}`)
		if len(b) != n {
			t.Fatalf("jsonOf(%d) has %d bytes", n, len(b))
		}
		return b
	}
	for _, path := range []string{"/v1/agent/register/init", "/v1/agent/verify/signature", chal + "/assertion", chal + "/deny", chal + "/dev-scan"} {
		t.Run("JSON "+path, func(t *testing.T) {
			for _, n := range []int{64<<10 + 1, 1 << 20} {
				e.do(t, "POST", path, jsonOf(n)).ExpectError(t, http.StatusRequestEntityTooLarge, "body_too_large", "")
			}
			// Without Content-Length (chunked), the bound holds as well.
			e.do(t, "POST", path, io.MultiReader(bytes.NewReader(jsonOf(64<<10+1)))).ExpectError(t, http.StatusRequestEntityTooLarge, "body_too_large", "")
			if r := e.do(t, "POST", path, jsonOf(64<<10)); r.Status == http.StatusRequestEntityTooLarge || r.Status >= 500 || r.Status < 400 {
				t.Errorf("%s with 64 KiB exactly: status %d, want the endpoint's own 4xx\nbody: %s", path, r.Status, testserver.Snippet(r.Body))
			}
		})
	}
	// formOf is a form of exactly n bytes with client credentials.
	formOf := func(n int) string {
		f := "grant_type=refresh_token&refresh_token=x&client_id=" + shop.id + "&client_secret=" + url.QueryEscape(shop.secret) + "&pad="
		return f + strings.Repeat("p", n-len(f))
	}
	for _, path := range []string{"/oauth2/token", "/oauth2/introspect", "/oauth2/revoke", "/oauth2/authorize"} {
		t.Run("form "+path, func(t *testing.T) {
			ct := []string{"Content-Type", "application/x-www-form-urlencoded"}
			for _, n := range []int{64<<10 + 1, 1 << 20} {
				expectOAuthError(t, e.do(t, "POST", path, formOf(n), ct...), http.StatusRequestEntityTooLarge, "invalid_request")
			}
			expectOAuthError(t, e.do(t, "POST", path, io.MultiReader(strings.NewReader(formOf(64<<10+1))), ct...), http.StatusRequestEntityTooLarge, "invalid_request")
			if r := e.do(t, "POST", path, formOf(64<<10), ct...); r.Status == http.StatusRequestEntityTooLarge || r.Status >= 500 {
				t.Errorf("%s with 64 KiB exactly: status %d, want it read\nbody: %s", path, r.Status, testserver.Snippet(r.Body))
			}
		})
	}
}

var (
	scriptTagRE = regexp.MustCompile(`(?is)<script\b([^>]*)>`)
	styleTagRE  = regexp.MustCompile(`(?is)<style\b([^>]*)>`)
	nonceAttrRE = regexp.MustCompile(`\snonce="([^"]*)"`)
	cspNonceRE  = regexp.MustCompile(`'nonce-([A-Za-z0-9+/_=-]+)'`)
)

// cspDirectives parses a Content-Security-Policy into directive -> sources.
func cspDirectives(csp string) map[string][]string {
	d := map[string][]string{}
	for _, part := range strings.Split(csp, ";") {
		f := strings.Fields(part)
		if len(f) > 0 {
			d[strings.ToLower(f[0])] = f[1:]
		}
	}
	return d
}

// expectPageHeaders checks the security headers of an HTML page and that its
// inline script and style carry the CSP nonce; it returns the nonce. formAction
// is the page's form-action, nil for none (a page whose form leads into the
// client's redirects, third review).
func expectPageHeaders(t *testing.T, r *testserver.Response, formAction []string) string {
	t.Helper()
	r.ExpectStatus(t, http.StatusOK)
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Fatalf("%s: Content-Type %q, want text/html", r.Request, ct)
	}
	for name, want := range map[string]string{"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"} {
		if got := r.Header.Values(name); len(got) != 1 || got[0] != want {
			t.Errorf("%s: %s %q, want %q", r.Request, name, got, want)
		}
	}
	csps := r.Header.Values("Content-Security-Policy")
	if len(csps) != 1 {
		t.Fatalf("%s: Content-Security-Policy %q, want one", r.Request, csps)
	}
	csp := csps[0]
	d := cspDirectives(csp)
	// Every source is a keyword, a nonce or data: (for the QR image): no host,
	// no scheme, no wildcard.
	if got, ok := d["form-action"]; ok != (formAction != nil) || strings.Join(got, " ") != strings.Join(formAction, " ") {
		t.Errorf("%s: CSP form-action %q (present %v), want %q (present %v)", r.Request, got, ok, formAction, formAction != nil)
	}
	for name, sources := range d {
		for _, src := range sources {
			keyword := strings.HasPrefix(src, "'") && strings.HasSuffix(src, "'") && !strings.Contains(src, "unsafe")
			if !keyword && !(name == "img-src" && src == "data:") {
				t.Errorf("%s: CSP %s allows %q (policy %q)", r.Request, name, src, csp)
			}
		}
	}
	for name, want := range map[string]string{"frame-ancestors": "'none'", "default-src": "'none'", "base-uri": "'none'"} {
		if got := d[name]; len(got) != 1 || got[0] != want {
			t.Errorf("%s: CSP %s %q, want %s (policy %q)", r.Request, name, got, want, csp)
		}
	}
	scriptSrc := strings.Join(d["script-src"], " ")
	m := cspNonceRE.FindStringSubmatch(scriptSrc)
	if m == nil || strings.Contains(scriptSrc, "unsafe-") || len(d["script-src"]) != 1 {
		t.Fatalf("%s: CSP script-src %q, want exactly one nonce source (policy %q)", r.Request, scriptSrc, csp)
	}
	nonce := m[1]
	if len(nonce) < 22 {
		t.Errorf("%s: CSP nonce %q is shorter than 128 bits", r.Request, nonce)
	}
	page := string(r.Body)
	scripts := scriptTagRE.FindAllStringSubmatch(page, -1)
	if len(scripts) == 0 {
		t.Errorf("%s: no <script> in the page", r.Request)
	}
	for _, tags := range [][][]string{scripts, styleTagRE.FindAllStringSubmatch(page, -1)} {
		for _, tag := range tags {
			if a := nonceAttrRE.FindStringSubmatch(tag[1]); a == nil || html.UnescapeString(a[1]) != nonce {
				t.Errorf("%s: tag %q does not carry the CSP nonce %q", r.Request, tag[0], nonce)
			}
			if strings.Contains(tag[1], "src=") {
				t.Errorf("%s: tag %q loads a script", r.Request, tag[0])
			}
		}
	}
	if style := strings.Join(d["style-src"], " "); style != "'nonce-"+nonce+"'" {
		t.Errorf("%s: CSP style-src %q, want the same nonce only", r.Request, style)
	}
	return nonce
}

// TestLimitsPageHeaders: the registration page and the login page send a strict
// Content-Security-Policy with a fresh nonce per answer, nosniff and
// no-referrer.
func TestLimitsPageHeaders(t *testing.T) {
	t.Parallel()
	shop := newOIDCClient("shop", "")
	e := limServer(t, shop, "rate_limit off")
	_, s, _ := e.pending(t, "paged-agent")
	loginID := e.authorize(t, e.authURL(shop))
	for name, page := range map[string]struct {
		u          string
		formAction []string
	}{
		"registration page": {s.URL, []string{"'self'"}},
		// Its Cancel leads into the client's redirects: no form-action (third review).
		"login page": {e.verifyURL(loginID), nil},
	} {
		t.Run(name, func(t *testing.T) {
			first := expectPageHeaders(t, e.do(t, "GET", page.u, nil, "Accept", "text/html"), page.formAction)
			second := expectPageHeaders(t, e.do(t, "GET", page.u, nil), page.formAction)
			if first == second {
				t.Errorf("two answers share the CSP nonce %q, want a fresh one each", first)
			}
		})
	}
}
