package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
)

// The hostile-input catalogue: hundreds of malformed or malicious requests across
// every endpoint of one server that already holds some state. Each must get its
// exact 4xx with the right error body, and none may change what the Store holds.
// The server and its state are set up in hostile_fixture_test.go; the cases are
// built in hostile_v1_test.go, hostile_palm_test.go and hostile_oauth_test.go.

// minHostileCases is the size of the catalogue the issue asks for.
const minHostileCases = 200

// Shapes of the expected answer.
const (
	hxV1     = iota + 1 // the /v1 error body {"error","code","details"}
	hxOAuth             // the RFC 6749/6750 error body {"error","error_description"}
	hxHTTP              // refused by Go's HTTP server before palmgate: status only
	hxLookup            // 200 by contract: an unknown agent, registered:false
	hxBack              // an authorization error sent back to the client: 302 to its redirect_uri
)

// hostileCase is one request of the catalogue and the answer it must get.
type hostileCase struct {
	name   string
	method string
	target string   // the request-target exactly as sent: raw path and query
	header []string // name, value pairs, sent as given (repeats allowed)
	body   []byte
	raw    []byte // when set, the whole request as sent, for protocol-level cases

	status    int
	shape     int
	code      string // the /v1 code, or the OAuth error
	field     string // details.field of a /v1 error, when not ""
	allow     string // the Allow header of a 405
	challenge string // WWW-Authenticate must contain this ("=" prefix: must equal the rest)
	redirect  string // the client's redirect_uri an hxBack error goes to

	// needsScan: the case carries hxNonceB, replaced when it is sent by the
	// nonce of B's scan URL renewed right before, so that it meets an open scan
	// URL however long the rest of the test took.
	needsScan bool
	// fresh, when set, makes the body when the case is sent: a body that carries
	// something short-lived (a palm assertion lives at most 5 minutes) is then
	// valid however long the cases before it took on a busy machine.
	fresh func() any
}

// hxNonceB stands in a needsScan case for the nonce of B's current scan URL.
const hxNonceB = "HX-NONCE-OF-B"

// hx starts a case; the methods below complete it.
func hx(name, method, target string) *hostileCase {
	return &hostileCase{name: name, method: method, target: target}
}

// hdr adds headers (name, value pairs).
func (c *hostileCase) hdr(kv ...string) *hostileCase {
	c.header = append(c.header, kv...)
	return c
}

// json sends body as application/json: []byte and string as they are, any other
// value marshalled.
func (c *hostileCase) json(body any) *hostileCase {
	return c.typed("application/json", body)
}

// freshJSON sends the JSON body makeBody returns when the case is sent (see fresh).
func (c *hostileCase) freshJSON(makeBody func() any) *hostileCase {
	c.fresh = makeBody
	return c.json(makeBody())
}

// bodyBytes is body as sent: []byte and string as they are, any other value marshalled.
func bodyBytes(body any) []byte {
	switch b := body.(type) {
	case []byte:
		return b
	case string:
		return []byte(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			panic(err)
		}
		return data
	}
}

// typed sends body with Content-Type ct ("" sends none).
func (c *hostileCase) typed(ct string, body any) *hostileCase {
	c.body = bodyBytes(body)
	if ct != "" {
		c.header = append(c.header, "Content-Type", ct)
	}
	return c
}

// form sends body as application/x-www-form-urlencoded.
func (c *hostileCase) form(body string) *hostileCase {
	return c.typed("application/x-www-form-urlencoded", body)
}

// v1 expects the /v1 error body with code (and details.field when field is given).
func (c *hostileCase) v1(status int, code string, field ...string) *hostileCase {
	c.status, c.shape, c.code = status, hxV1, code
	if len(field) > 0 {
		c.field = field[0]
	}
	return c
}

// openScan marks c as needing B's scan URL open when it is sent.
func (c *hostileCase) openScan() *hostileCase {
	c.needsScan = true
	return c
}

// withNonce is c with B's current nonce in place of hxNonceB.
func (c *hostileCase) withNonce(nonce string) *hostileCase {
	d := *c
	d.target = strings.ReplaceAll(c.target, hxNonceB, url.QueryEscape(nonce))
	d.body = bytes.ReplaceAll(c.body, []byte(hxNonceB), []byte(nonce))
	return &d
}

// notAllowed expects 405 with the Allow header allow, in the path's dialect: code
// method_not_allowed under /v1, OAuth's invalid_request under /oauth2 (fourth
// review).
func (c *hostileCase) notAllowed(allow string) *hostileCase {
	c.allow = allow
	if strings.HasPrefix(c.target, "/oauth2/") {
		return c.oauth(http.StatusMethodNotAllowed, "invalid_request")
	}
	return c.v1(http.StatusMethodNotAllowed, "method_not_allowed")
}

// oauth expects the RFC 6749 error body.
func (c *hostileCase) oauth(status int, code string) *hostileCase {
	c.status, c.shape, c.code = status, hxOAuth, code
	return c
}

// back expects an authorization error sent back to the client: 302 to redirect
// with error code (RFC 6749 4.1.2.1), after the client and redirect_uri were found
// valid.
func (c *hostileCase) back(redirect, code string) *hostileCase {
	c.status, c.shape, c.code, c.redirect = http.StatusFound, hxBack, code, redirect
	return c
}

// bearer expects an RFC 6750 refusal: the error body and a WWW-Authenticate
// challenge containing challenge ("=..." for an exact value).
func (c *hostileCase) bearer(status int, code, challenge string) *hostileCase {
	c.challenge = challenge
	return c.oauth(status, code)
}

// proto expects a refusal by the HTTP server itself (status only).
func (c *hostileCase) proto(status int) *hostileCase {
	c.status, c.shape = status, hxHTTP
	return c
}

// unknownAgent expects the contract's 200 answer for an unknown agent.
func (c *hostileCase) unknownAgent() *hostileCase {
	c.status, c.shape = http.StatusOK, hxLookup
	return c
}

// hostileRequest renders the request bytes of c.
func hostileRequest(c *hostileCase, host string) []byte {
	if c.raw != nil {
		return c.raw
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nUser-Agent: palmgate-hostile-test\r\n", c.method, c.target, host)
	for i := 0; i+1 < len(c.header); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", c.header[i], c.header[i+1])
	}
	body := c.body
	if c.fresh != nil {
		body = bodyBytes(c.fresh())
	}
	if body != nil || c.method == "POST" || c.method == "PUT" || c.method == "PATCH" {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

// hostileSend sends c over a fresh TCP connection, byte for byte, and reads the
// answer. The request is written concurrently, as a server may answer (413, 431)
// before it has read everything.
func hostileSend(t *testing.T, addr string, c *hostileCase) *testserver.Response {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("%s: dial: %v", c.name, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	req := hostileRequest(c, addr)
	go func() { _, _ = conn.Write(req) }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: c.method})
	if err != nil {
		t.Fatalf("%s %.120s: reading the response: %v", c.method, c.target, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %.120s: reading the body: %v", c.method, c.target, err)
	}
	return &testserver.Response{Status: resp.StatusCode, Header: resp.Header, Body: body,
		Request: fmt.Sprintf("%s %.160s", c.method, c.target)}
}

// check verifies the answer to c.
func (c *hostileCase) check(t *testing.T, r *testserver.Response) {
	t.Helper()
	if r.Status >= 500 {
		t.Fatalf("%s: status %d: a server fault\nbody: %s", r.Request, r.Status, testserver.Snippet(r.Body))
	}
	if c.shape == hxBack {
		if r.Status != http.StatusFound {
			t.Errorf("%s: status %d, want 302 back to the client with error %s\nbody: %s", r.Request, r.Status, c.code, testserver.Snippet(r.Body))
			return
		}
		q := callbackQuery(t, r.Header.Get("Location"), c.redirect)
		if q.Get("error") != c.code || q.Get("error_description") == "" || q.Has("code") {
			t.Errorf("%s: redirect query %v, want error %s with a description and no code", r.Request, q, c.code)
		}
		if len(q.Get("state")) > 500 {
			t.Errorf("%s: a state of %d characters went back", r.Request, len(q.Get("state")))
		}
		return
	}
	if c.shape != hxLookup && (r.Status < 400 || r.Status > 499) {
		t.Errorf("%s: status %d, want the 4xx %d\nheaders: %v\nbody: %s", r.Request, r.Status, c.status, r.Header, testserver.Snippet(r.Body))
		return
	}
	for _, leak := range []string{"root:x:0:0", "<script", "goroutine ", "panic"} {
		if bytes.Contains(bytes.ToLower(r.Body), []byte(leak)) {
			t.Errorf("%s: the answer contains %q:\n%s", r.Request, leak, testserver.Snippet(r.Body))
		}
	}
	if loc := r.Header.Get("Location"); loc != "" {
		t.Errorf("%s: Location %q, want no redirect", r.Request, loc)
	}
	switch c.shape {
	case hxV1:
		r.ExpectError(t, c.status, c.code, c.field)
	case hxOAuth:
		expectOAuthError(t, r, c.status, c.code)
	case hxHTTP:
		if r.Status != c.status {
			t.Errorf("%s: status %d, want %d\nbody: %s", r.Request, r.Status, c.status, testserver.Snippet(r.Body))
		}
	case hxLookup:
		if r.Status != http.StatusOK {
			t.Errorf("%s: status %d, want 200 (an unknown agent)\nbody: %s", r.Request, r.Status, testserver.Snippet(r.Body))
			return
		}
		var m map[string]any
		if err := json.Unmarshal(r.Body, &m); err != nil || m["registered"] != false || m["verified"] != false || m["registeredAt"] != "never" || len(m) != 3 {
			t.Errorf("%s: body %s, want exactly {registered:false, verified:false, registeredAt:\"never\"}", r.Request, testserver.Snippet(r.Body))
		}
	default:
		t.Fatalf("case %q has no expectation", c.name)
	}
	if c.allow != "" && r.Header.Get("Allow") != c.allow {
		t.Errorf("%s: Allow %q, want %q", r.Request, r.Header.Get("Allow"), c.allow)
	}
	if c.challenge != "" {
		got := r.Header.Values("WWW-Authenticate")
		want, exact := strings.CutPrefix(c.challenge, "=")
		switch {
		case len(got) != 1:
			t.Errorf("%s: WWW-Authenticate %q, want one challenge containing %s", r.Request, got, want)
		case exact && got[0] != want:
			t.Errorf("%s: WWW-Authenticate %q, want exactly %s", r.Request, got[0], want)
		case !exact && !strings.Contains(got[0], want):
			t.Errorf("%s: WWW-Authenticate %q, want it to contain %s", r.Request, got[0], want)
		}
	}
}

// storeCounts reads the Store's live record counts by kind from Caddy's admin
// endpoint.
func storeCounts(t *testing.T, e *env) map[string]int {
	t.Helper()
	resp := testserver.Do(t, "GET", "http://"+e.AdminAddr+"/palmgate/stats", nil).ExpectStatus(t, http.StatusOK)
	var v struct {
		Records map[string]int `json:"records"`
	}
	resp.Decode(t, &v)
	if len(v.Records) == 0 {
		t.Fatalf("GET /palmgate/stats: %s, want {\"records\": {...}}", resp.Body)
	}
	return v.Records
}

// TestHostileCatalogue sends the whole catalogue to one server with a registered
// agent, a pending registration, a finished and a pending login and live tokens,
// and checks every answer and that the Store's record counts did not move.
func TestHostileCatalogue(t *testing.T) {
	t.Parallel()
	f := newHostileFixture(t)
	var cases []*hostileCase
	for _, build := range []func(*hostileFixture) []*hostileCase{
		hostileMethodCases, hostileRegistryCases, hostileBodyCases, hostilePathCases,
		hostilePalmCases, hostileAuthorizeCases, hostileTokenCases, hostileBearerCases,
		hostileProtocolCases,
	} {
		cases = append(cases, build(f)...)
	}

	names := map[string]bool{}
	failing := 0
	for _, c := range cases {
		if names[c.name] {
			t.Errorf("two cases are named %q", c.name)
		}
		names[c.name] = true
		if c.shape != hxLookup {
			failing++
		}
	}
	if failing < minHostileCases {
		t.Errorf("the catalogue has %d cases that must be refused, want at least %d", failing, minHostileCases)
	}
	t.Logf("hostile catalogue: %d cases (%d refusals, %d contract lookups)", len(cases), failing, len(cases)-failing)

	before := storeCounts(t, f.e)
	t.Run("catalogue", func(t *testing.T) {
		// The cases that need B's scan URL open go first, one after the other,
		// right after it was renewed; the parallel ones then take as long as the
		// machine makes them.
		var timed []*hostileCase
		for _, c := range cases {
			if c.needsScan {
				timed = append(timed, c)
			}
		}
		for i, r := range f.sendWithOpenScan(t, timed) {
			t.Run(timed[i].name, func(t *testing.T) { timed[i].check(t, r) })
		}
		for _, c := range cases {
			if c.needsScan {
				continue
			}
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.check(t, hostileSend(t, f.e.URL[len("http://"):], c))
			})
		}
	})
	after := storeCounts(t, f.e)
	if !maps.Equal(before, after) {
		var diff []string
		for _, k := range slices.Sorted(maps.Keys(mergeKeys(before, after))) {
			if before[k] != after[k] {
				diff = append(diff, fmt.Sprintf("%s: %d -> %d", k, before[k], after[k]))
			}
		}
		t.Errorf("the catalogue changed the Store's record counts: %s", strings.Join(diff, ", "))
	}
	// The state the catalogue aimed at is intact: the pending registration and
	// the pending login can still be completed, the tokens still work.
	if st := f.e.status(t, f.sessB.ID); str(st["status"]) != "pending" {
		t.Errorf("the pending registration is %v after the catalogue, want pending", st["status"])
	}
	// Read through the scan URL the page shows now: the fixture's may have lapsed.
	if got := f.e.challengeStatus(t, f.e.verifyInfo(t, f.sessB)); got != "pending" {
		t.Errorf("B's palm challenge is %q after the catalogue, want pending", got)
	}
	if p := f.e.loginPageJSON(t, f.pendingID); p.Status != "pending" {
		t.Errorf("the pending login is %q after the catalogue, want pending", p.Status)
	}
	f.e.expectUserinfo(t, f.tokens.access, f.sub)
	// The refresh token was neither rotated nor revoked (a rotation changes no
	// record count): it is still the current one of its family.
	resp := f.e.postToken(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {f.tokens.refresh},
		"client_id": {f.shop.id}, "client_secret": {f.shop.secret}})
	if resp.Status != http.StatusOK {
		t.Errorf("refreshing with the fixture's refresh token after the catalogue: %d %s, want 200", resp.Status, testserver.Snippet(resp.Body))
	}
}

// sendWithOpenScan sends cases, in order, with B's current nonce, right after
// the owner's page renewed B's scan URL (it renews one older than
// palm.ScanRenewAfter, so at least a minute is left). When the scan URL lapsed
// before the last answer, on a machine slow enough, the whole batch is sent
// again with a renewed one: every answer checked was given while the nonce was
// open, and none is a 410 for a lapse the machine's speed caused.
func (f *hostileFixture) sendWithOpenScan(t *testing.T, cases []*hostileCase) []*testserver.Response {
	t.Helper()
	const attempts = 5
	for attempt := 1; ; attempt++ {
		c := f.e.verifyInfo(t, f.sessB)
		if c.Status != "pending" {
			t.Fatalf("B's palm challenge is %q, want pending", c.Status)
		}
		lapses := parseTime(t, c.ScanExpiresAt)
		answers := make([]*testserver.Response, len(cases))
		for i, hc := range cases {
			answers[i] = hostileSend(t, f.e.URL[len("http://"):], hc.withNonce(c.Nonce))
		}
		if time.Now().Before(lapses) {
			return answers
		}
		if attempt == attempts {
			t.Fatalf("B's scan URL lapsed before %d requests were answered, %d times in a row", len(cases), attempts)
		}
		t.Logf("B's scan URL lapsed at %s before the %d requests needing it were answered; again with a renewed one", c.ScanExpiresAt, len(cases))
	}
}

func mergeKeys(a, b map[string]int) map[string]int {
	m := maps.Clone(a)
	maps.Copy(m, b)
	return m
}

// hostileProtocolCases are requests Go's HTTP server refuses before palmgate
// sees them: their answers are plain text, and only the status is checked.
func hostileProtocolCases(f *hostileFixture) []*hostileCase {
	huge := strings.Repeat("a", 64<<10)
	host := f.e.URL[len("http://"):]
	raw := func(name, req string, status int) *hostileCase {
		c := hx(name, "GET", "/").proto(status)
		c.raw = []byte(strings.ReplaceAll(req, "{host}", host))
		return c
	}
	return []*hostileCase{
		hx("64 KiB header at the leaderboard", "GET", "/v1/human/leaderboard").hdr("X-Padding", huge).proto(431),
		hx("64 KiB header at init", "POST", "/v1/agent/register/init").hdr("X-Padding", huge).json(`{}`).proto(431),
		hx("64 KiB Authorization at userinfo", "GET", "/oauth2/userinfo").hdr("Authorization", "Bearer "+huge).proto(431),
		hx("64 KiB cookie at the token endpoint", "POST", "/oauth2/token").hdr("Cookie", "c="+huge).form("grant_type=refresh_token").proto(431),
		hx("64 KiB query at authorize", "GET", "/oauth2/authorize?state="+huge).proto(431),
		raw("NUL byte in a header value", "GET /v1/human/leaderboard HTTP/1.1\r\nHost: {host}\r\nX-A: a\x00b\r\nConnection: close\r\n\r\n", 400),
		raw("header line without a colon", "GET /v1/human/leaderboard HTTP/1.1\r\nHost: {host}\r\nnot a header\r\nConnection: close\r\n\r\n", 400),
		raw("space in the request path", "GET /v1/human/lead erboard HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n", 400),
		raw("HTTP/1.1 without Host", "GET /v1/human/leaderboard HTTP/1.1\r\nConnection: close\r\n\r\n", 400),
		raw("two different Content-Lengths at init", "POST /v1/agent/register/init HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\nConnection: close\r\n\r\n{}x", 400),
		raw("negative Content-Length at the token endpoint", "POST /oauth2/token HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: -1\r\nConnection: close\r\n\r\n", 400),
	}
}
