package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
)

// upstream is the service palmgate_bearer protects: it remembers the headers of
// every request it receives under the request's X-Test-Request id and answers
// {"upstream":true}.
type upstream struct {
	port int
	mu   sync.Mutex
	seen map[string]http.Header
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{seen: map[string]http.Header{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen[r.Header.Get("X-Test-Request")] = r.Header.Clone()
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"upstream":true}`)
	}))
	t.Cleanup(srv.Close)
	u.port = srv.Listener.Addr().(*net.TCPAddr).Port
	return u
}

// route is a Caddyfile route for path: palmgate_bearer with options (one per
// line) in front of a reverse_proxy to u that passes the identity placeholders up.
func (u *upstream) route(path string, options ...string) string {
	return fmt.Sprintf("route %s {\npalmgate_bearer {\n%s\n}\nreverse_proxy 127.0.0.1:%d {\n"+
		"header_up X-User-Sub {http.auth.user.id}\nheader_up X-User-Scope {http.auth.user.scope}\n"+
		"header_up X-User-Client {http.auth.user.client_id}\n}\n}\n", path, strings.Join(options, "\n"), u.port)
}

// proxied is an answer through Caddy and what the upstream saw of the request
// (nil when it never got there).
type proxied struct {
	*testserver.Response
	seen http.Header
}

// call sends a request through e to a protected path; authorization "" sends
// no Authorization header.
func (u *upstream) call(t *testing.T, e *env, method, path, authorization string, headers ...string) proxied {
	t.Helper()
	id := randHex(8)
	h := append([]string{"X-Test-Request", id}, headers...)
	if authorization != "" {
		h = append(h, "Authorization", authorization)
	}
	resp := e.do(t, method, path, nil, h...)
	u.mu.Lock()
	defer u.mu.Unlock()
	return proxied{resp, u.seen[id]}
}

// expectAdmitted checks that the upstream answered and saw exactly tok's
// identity in X-User-* and X-Palmgate-*, and authorization as Authorization
// ("" for none).
func (p proxied) expectAdmitted(t *testing.T, tok tokenSet, authorization string) {
	t.Helper()
	if p.Status != http.StatusOK || string(p.Body) != `{"upstream":true}` || p.seen == nil {
		t.Errorf("%s: %d %s (upstream reached: %v), want the upstream's 200", p.Request, p.Status, testserver.Snippet(p.Body), p.seen != nil)
		return
	}
	for name, want := range map[string]string{
		"X-User-Sub": tok.sub, "X-User-Scope": tok.scope, "X-User-Client": tok.client,
		"X-Palmgate-Sub": tok.sub, "X-Palmgate-Scope": tok.scope, "X-Palmgate-Client-Id": tok.client,
	} {
		if got := p.seen.Values(name); len(got) != 1 || got[0] != want {
			t.Errorf("%s: upstream saw %s %q, want exactly %q", p.Request, name, got, want)
		}
	}
	if got := p.seen.Values("Authorization"); (authorization == "" && len(got) != 0) || (authorization != "" && !slices.Equal(got, []string{authorization})) {
		t.Errorf("%s: upstream saw Authorization %q, want %q", p.Request, got, authorization)
	}
}

// expectRefused checks a refusal of palmgate_bearer that never reached the
// upstream. The middleware returns its refusal to Caddy as an HTTP error (as
// caddyauth does), so that handle_errors can shape it and the access log records
// it: without handle_errors the body is Caddy's default, empty, and the status,
// the challenge and Retry-After say it all (expectChallenge).
func (p proxied) expectRefused(t *testing.T, status int, realm, code, scope string) {
	t.Helper()
	if p.seen != nil {
		t.Errorf("%s: the upstream was called for a refused request", p.Request)
	}
	r := p.Response
	if r.Status != status {
		t.Errorf("%s: status %d, want %d (%s)\nbody: %s", r.Request, r.Status, status, code, testserver.Snippet(r.Body))
	}
	if len(r.Body) != 0 {
		t.Errorf("%s: body %s, want Caddy's empty error body", r.Request, testserver.Snippet(r.Body))
	}
	if status == http.StatusServiceUnavailable && r.Header.Get("Retry-After") == "" {
		t.Errorf("%s: a 503 without Retry-After", r.Request)
	}
	if status == http.StatusUnauthorized && !strings.Contains(r.Header.Get("WWW-Authenticate"), "resource_metadata=") {
		t.Errorf("%s: a 401 of palmgate_bearer without resource_metadata", r.Request)
	}
	expectChallenge(t, r, status, realm, code, scope)
}

// expectRefusal checks an RFC 6750 refusal of palmgate's own endpoints
// (/oauth2/userinfo, /oauth2/check): the status, a JSON body
// {"error","error_description"} and the challenge (expectChallenge).
func expectRefusal(t *testing.T, r *testserver.Response, status int, realm, code, scope string) {
	t.Helper()
	if r.Status != status {
		t.Errorf("%s: status %d, want %d (%s)\nbody: %s", r.Request, r.Status, status, code, testserver.Snippet(r.Body))
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: Content-Type %q, want application/json", r.Request, ct)
	}
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil || str(m["error"]) == "" || str(m["error_description"]) == "" || (code != "" && str(m["error"]) != code) {
		t.Errorf("%s: body %s, want {\"error\":%q,\"error_description\":...}", r.Request, testserver.Snippet(r.Body), code)
	}
	expectChallenge(t, r, status, realm, code, scope)
}

// expectChallenge checks the WWW-Authenticate of a refusal: for 401 and 403 one
// Bearer challenge of realm: without an error when code is "" (no token sent),
// else with error code, an error_description for invalid_token and scope for
// insufficient_scope; on a 5xx none calling the token invalid.
func expectChallenge(t *testing.T, r *testserver.Response, status int, realm, code, scope string) {
	t.Helper()
	h := r.Header.Values("WWW-Authenticate")
	if status >= 500 {
		if len(h) > 0 && strings.Contains(h[0], "invalid_token") {
			t.Errorf("%s: WWW-Authenticate %q calls a token invalid on a server-side failure", r.Request, h)
		}
		return
	}
	if len(h) != 1 {
		t.Errorf("%s: WWW-Authenticate %q, want one Bearer challenge", r.Request, h)
		return
	}
	scheme, params := parseChallenge(h[0])
	want := map[string]string{"realm": realm}
	switch code {
	case "":
	case "insufficient_scope":
		want["error"], want["scope"] = code, scope
		if d, ok := params["error_description"]; ok {
			want["error_description"] = d
		}
	default:
		want["error"], want["error_description"] = code, params["error_description"]
		if params["error_description"] == "" {
			t.Errorf("%s: WWW-Authenticate %q has no error_description", r.Request, h[0])
		}
	}
	if u, ok := params["resource_metadata"]; ok && (status == http.StatusUnauthorized || code == "insufficient_scope") {
		// palmgate_bearer's 401 names its RFC 9728 document and the scopes it
		// requires (issue 23; TestBearerResourceMetadata checks their values), and
		// so does its 403 insufficient_scope (fourth review,
		// TestBearerInsufficientScopeNamesTheMetadata).
		if !strings.HasPrefix(u, "http") || !strings.Contains(u, "/.well-known/oauth-protected-resource") {
			t.Errorf("%s: resource_metadata %q is no metadata URL", r.Request, u)
		}
		want["resource_metadata"] = u
		if sc, ok := params["scope"]; ok {
			want["scope"] = sc
		}
	}
	if scheme != "Bearer" || fmt.Sprint(params) != fmt.Sprint(want) {
		t.Errorf("%s: WWW-Authenticate %q, want Bearer with %v", r.Request, h[0], want)
	}
}

// parseChallenge splits an RFC 7235 challenge into its scheme and parameters.
func parseChallenge(h string) (string, map[string]string) {
	scheme, rest, _ := strings.Cut(h, " ")
	params := map[string]string{}
	for rest = strings.TrimLeft(rest, " ,"); rest != ""; rest = strings.TrimLeft(rest, " ,") {
		name, after, ok := strings.Cut(rest, "=")
		if !ok {
			params[rest] = ""
			break
		}
		var val strings.Builder
		if strings.HasPrefix(after, `"`) {
			i := 1
			for ; i < len(after) && after[i] != '"'; i++ {
				if after[i] == '\\' && i+1 < len(after) {
					i++
				}
				val.WriteByte(after[i])
			}
			rest = after[min(i+1, len(after)):]
		} else {
			v, r, _ := strings.Cut(after, ",")
			val.WriteString(strings.TrimSpace(v))
			rest = r
		}
		params[strings.ToLower(strings.TrimSpace(name))] = val.String()
	}
	return scheme, params
}

// tokenSet is the outcome of a login: the tokens and the identity they carry.
type tokenSet struct {
	access, id, refresh string
	sub, scope, client  string
}

// codeWithScope logs subject in at client c with scope and returns the code.
func (e *env) codeWithScope(t *testing.T, c oidcClient, subject, scope string) string {
	t.Helper()
	q := e.login(t, e.authURL(c, "scope", scope), subject, c.redirects[0])
	if q.Get("code") == "" {
		t.Fatalf("callback query %v, want a code", q)
	}
	return q.Get("code")
}

// redeem exchanges a code of c and checks that the tokens carry the granted
// scope and one pairwise sub.
func (e *env) redeem(t *testing.T, c oidcClient, code string) tokenSet {
	t.Helper()
	m := e.exchange(t, c, code, "")
	ts := tokenSet{access: str(m["access_token"]), id: str(m["id_token"]), refresh: str(m["refresh_token"]),
		scope: str(m["scope"]), client: c.id}
	claims := jwtPart(t, ts.access, 1)
	ts.sub = str(claims["sub"])
	if !subRE.MatchString(ts.sub) || str(jwtPart(t, ts.id, 1)["sub"]) != ts.sub {
		t.Errorf("access token sub %q, ID token sub %v: want one pairwise sub", ts.sub, jwtPart(t, ts.id, 1)["sub"])
	}
	if str(claims["scope"]) != ts.scope || str(claims["client_id"]) != c.id {
		t.Errorf("access token scope %v client_id %v, want %q and %q", claims["scope"], claims["client_id"], ts.scope, c.id)
	}
	return ts
}

// tokensFor logs subject in at c with scope and redeems the code; the granted
// scope must be the asked one.
func (e *env) tokensFor(t *testing.T, c oidcClient, subject, scope string) tokenSet {
	t.Helper()
	ts := e.redeem(t, c, e.codeWithScope(t, c, subject, scope))
	got, want := strings.Fields(ts.scope), strings.Fields(scope)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("granted scope %q, want %q", ts.scope, scope)
	}
	return ts
}

// oidcOptions are the options of a dev palmgate with clients, rate_limit off,
// extra global lines and site.
func oidcOptions(clients []oidcClient, site string, extra ...string) testserver.Options {
	lines := append([]string{"rate_limit off"}, extra...)
	for _, c := range clients {
		lines = append(lines, c.config())
	}
	return testserver.Options{Global: strings.Join(lines, "\n"), Site: site}
}

// eventually retries check every 100 ms until it reports "" and fails the test
// with the report of a check begun d or more after the first: the bound is on
// when the check starts, not on how fast the machine answers it.
func eventually(t *testing.T, d time.Duration, check func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		began := time.Now()
		msg := check()
		if msg == "" {
			return
		}
		if began.After(deadline) {
			t.Errorf("after %s: %s", d, msg)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// copyDir copies the regular files under src to dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	})
	if err != nil {
		t.Fatalf("copying %s: %v", src, err)
	}
}

// rotateKeys rotates the signing keys of e through Caddy's admin API and
// returns the new active ES256 key id.
func rotateKeys(t *testing.T, e *env) string {
	t.Helper()
	resp := testserver.Do(t, "POST", "http://"+e.AdminAddr+"/palmgate/keys/rotate", nil).ExpectStatus(t, http.StatusOK)
	active, _ := resp.Object(t)["active"].(map[string]any)
	if str(active["ES256"]) == "" || str(active["RS256"]) == "" || str(active["EdDSA"]) == "" {
		t.Fatalf("key rotation answered %s, want {\"active\":{\"ES256\":kid,\"EdDSA\":kid,\"RS256\":kid}}", resp.Body)
	}
	return str(active["ES256"])
}

// hs256Confusion re-signs token with HS256 keyed by the PEM of its ES256
// public key from the JWKS: the algorithm confusion attack.
func hs256Confusion(t *testing.T, e *env, token string) string {
	t.Helper()
	h := jwtPart(t, token, 0)
	var set struct{ Keys []map[string]string }
	e.do(t, "GET", "/oauth2/jwks", nil).ExpectStatus(t, http.StatusOK).Decode(t, &set)
	var pemKey []byte
	for _, k := range set.Keys {
		if k["kid"] == h["kid"] {
			x, _ := base64.RawURLEncoding.DecodeString(k["x"])
			y, _ := base64.RawURLEncoding.DecodeString(k["y"])
			pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
			if err != nil {
				t.Fatalf("JWKS key %v: %v", k, err)
			}
			der, _ := x509.MarshalPKIXPublicKey(pub)
			pemKey = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
		}
	}
	if pemKey == nil {
		t.Fatalf("kid %v not in the JWKS", h["kid"])
	}
	h["alg"] = "HS256"
	signed := encodeSegment(t, h) + "." + strings.Split(token, ".")[1]
	mac := hmac.New(sha256.New, pemKey)
	mac.Write([]byte(signed))
	return signed + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// withHeader re-encodes token's JWS header with name set to value, keeping the
// payload and the signature.
func withHeader(t *testing.T, token, name string, value any) string {
	t.Helper()
	h := jwtPart(t, token, 0)
	h[name] = value
	parts := strings.Split(token, ".")
	return encodeSegment(t, h) + "." + parts[1] + "." + parts[2]
}

// startTwins starts e with opts and a twin: another palmgate (issuer) with the
// same clients and, on a copy of e's store, the same signing keys.
func startTwins(t *testing.T, opts testserver.Options) (e, twin *env) {
	t.Helper()
	e = start(t, opts)
	e.Stop()
	dir := t.TempDir()
	copyDir(t, e.DataDir, dir)
	e.Restart(t)
	opts.DataDir, opts.Site = dir, "palmgate"
	return e, start(t, opts)
}

// expectChecked checks a 200 of /oauth2/check with tok's identity headers.
func expectChecked(t *testing.T, r *testserver.Response, tok tokenSet) {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Errorf("%s: status %d, want 200\nbody: %s", r.Request, r.Status, testserver.Snippet(r.Body))
		return
	}
	for name, want := range map[string]string{"X-Palmgate-Sub": tok.sub, "X-Palmgate-Scope": tok.scope, "X-Palmgate-Client-Id": tok.client} {
		if got := r.Header.Values(name); len(got) != 1 || got[0] != want {
			t.Errorf("%s: %s %q, want exactly %q", r.Request, name, got, want)
		}
	}
}

// sleepUntil sleeps until the wall clock reaches at.
func sleepUntil(at time.Time) { time.Sleep(time.Until(at)) }

// expectRefusedSoon waits for palmgate_bearer to refuse tok as invalid
// (revocations are refreshed every second): a check begun 3 s after the call
// must refuse it. Then it checks the refusal.
func (u *upstream) expectRefusedSoon(t *testing.T, e *env, path string, tok tokenSet) {
	t.Helper()
	var last proxied
	eventually(t, 3*time.Second, func() string {
		last = u.call(t, e, "GET", path, "Bearer "+tok.access)
		if last.Status == http.StatusUnauthorized {
			return ""
		}
		return fmt.Sprintf("%s: status %d, want 401 for a revoked grant", last.Request, last.Status)
	})
	last.expectRefused(t, 401, "palmgate", "invalid_token", "")
}
