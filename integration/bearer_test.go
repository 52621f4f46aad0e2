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
	"net/url"
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
	if u, ok := params["resource_metadata"]; ok && status == http.StatusUnauthorized {
		// palmgate_bearer's 401 names its RFC 9728 document and the scopes it
		// requires (issue 23; TestBearerResourceMetadata checks their values).
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

// spoofed are identity headers a client may send to impersonate someone.
var spoofed = []string{"X-Palmgate-Sub", "attacker", "X-User-Sub", "attacker", "X-Palmgate-Scope", "orders:write",
	"X-Palmgate-Client-Id", "attacker", "X-User-Scope", "admin", "X-User-Client", "attacker"}

// TestBearerLocal protects routes of a palmgate Caddy with palmgate_bearer in
// local mode: the upstream sees the token's identity, and every bad token is
// refused with its RFC 6750 answer before reaching the upstream. It also
// covers the forward-auth endpoint /oauth2/check.
func TestBearerLocal(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	shop := newOIDCClient("shop", "")
	site := "palmgate\n" + u.route("/api/*", "scope orders:read", "strip_token") + u.route("/raw/*") +
		u.route("/admin/*", "scope orders:read orders:write", "realm shop", "cache_size -1")
	e, twin := startTwins(t, oidcOptions([]oidcClient{shop}, site))
	alice := e.subject("alice")
	full := e.tokensFor(t, shop, alice, "openid orders:read")
	narrow := e.tokensFor(t, shop, alice, "openid")
	both := e.tokensFor(t, shop, e.subject("bob"), "openid offline_access orders:read orders:write")
	if full.sub != narrow.sub || full.sub == both.sub {
		t.Errorf("subs: alice %q and %q, bob %q: want one per person", full.sub, narrow.sub, both.sub)
	}
	// Tokens of another issuer: with the same key, then with its own.
	foreign := twin.tokensFor(t, shop, twin.subject("alice"), "openid orders:read")
	if k1, k2 := jwtPart(t, foreign.access, 0)["kid"], jwtPart(t, full.access, 0)["kid"]; k1 != k2 {
		t.Fatalf("the twin signs with kid %v, want the same key as the server (%v)", k1, k2)
	}
	rotateKeys(t, twin)
	foreignKey := twin.tokensFor(t, shop, twin.subject("alice"), "openid orders:read")
	parts := strings.Split(full.access, ".")

	t.Run("admitted", func(t *testing.T) {
		t.Parallel()
		u.call(t, e, "GET", "/api/orders", "Bearer "+full.access, spoofed...).expectAdmitted(t, full, "")
		u.call(t, e, "POST", "/api/orders", "bearer "+full.access).expectAdmitted(t, full, "")
		u.call(t, e, "GET", "/raw/x", "Bearer "+narrow.access, spoofed...).expectAdmitted(t, narrow, "Bearer "+narrow.access)
		for range 2 { // cache_size -1: every request verifies the signature
			u.call(t, e, "GET", "/admin/x", "Bearer "+both.access, spoofed...).expectAdmitted(t, both, "Bearer "+both.access)
		}
	})

	cases := []struct {
		name, path, authorization string
		status                    int
		realm, code, scope        string
	}{
		{"no Authorization", "/api/x", "", 401, "palmgate", "", ""},
		{"Basic credentials", "/api/x", basicAuth(shop.id, shop.secret), 401, "palmgate", "", ""},
		{"empty Bearer", "/api/x", "Bearer ", 401, "palmgate", "", ""},
		{"not a JWT", "/api/x", "Bearer not-a-token", 401, "palmgate", "invalid_token", ""},
		{"garbage segments", "/api/x", "Bearer a.b.c", 401, "palmgate", "invalid_token", ""},
		{"tampered signature", "/api/x", "Bearer " + tamper(full.access), 401, "palmgate", "invalid_token", ""},
		{"signature of another token", "/api/x", "Bearer " + parts[0] + "." + parts[1] + "." + strings.Split(narrow.access, ".")[2], 401, "palmgate", "invalid_token", ""},
		{"alg none", "/api/x", "Bearer " + strings.Join(strings.Split(withHeader(t, full.access, "alg", "none"), ".")[:2], ".") + ".", 401, "palmgate", "invalid_token", ""},
		{"HS256 keyed with the public key", "/api/x", "Bearer " + hs256Confusion(t, e, full.access), 401, "palmgate", "invalid_token", ""},
		{"typ JWT", "/api/x", "Bearer " + withHeader(t, full.access, "typ", "JWT"), 401, "palmgate", "invalid_token", ""},
		{"ID token", "/api/x", "Bearer " + full.id, 401, "palmgate", "invalid_token", ""},
		{"refresh token", "/api/x", "Bearer " + both.refresh, 401, "palmgate", "invalid_token", ""},
		{"other issuer, same key", "/api/x", "Bearer " + foreign.access, 401, "palmgate", "invalid_token", ""},
		{"other issuer, other key", "/api/x", "Bearer " + foreignKey.access, 401, "palmgate", "invalid_token", ""},
		{"scope not granted", "/api/x", "Bearer " + narrow.access, 403, "palmgate", "insufficient_scope", "orders:read"},
		{"other issuer, no scope required", "/raw/x", "Bearer " + foreign.access, 401, "palmgate", "invalid_token", ""},
		{"realm, no token", "/admin/x", "", 401, "shop", "", ""},
		{"realm, tampered, no cache", "/admin/x", "Bearer " + tamper(both.access), 401, "shop", "invalid_token", ""},
		{"one of two scopes", "/admin/x", "Bearer " + full.access, 403, "shop", "insufficient_scope", "orders:read orders:write"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u.call(t, e, "GET", tc.path, tc.authorization, spoofed...).expectRefused(t, tc.status, tc.realm, tc.code, tc.scope)
		})
	}

	t.Run("check", func(t *testing.T) {
		t.Parallel()
		check := func(method, query, token string) *testserver.Response {
			var h []string
			if token != "" {
				h = []string{"Authorization", "Bearer " + token}
			}
			return e.do(t, method, "/oauth2/check"+query, nil, append(h, spoofed...)...)
		}
		for _, m := range []string{"GET", "POST", "DELETE", "HEAD"} {
			expectChecked(t, check(m, "", narrow.access), narrow)
		}
		expectChecked(t, check("GET", "?scope=orders:read", full.access), full)
		expectChecked(t, check("PUT", "?scope=orders:read+orders:write", both.access), both)
		expectChecked(t, check("GET", "?scope=orders:write&scope=openid", both.access), both)
		expectRefusal(t, check("GET", "?scope=orders:read", ""), 401, "palmgate", "", "")
		expectRefusal(t, check("POST", "", tamper(full.access)), 401, "palmgate", "invalid_token", "")
		expectRefusal(t, check("GET", "", full.id), 401, "palmgate", "invalid_token", "")
		expectRefusal(t, check("GET", "", foreign.access), 401, "palmgate", "invalid_token", "")
		expectRefusal(t, check("GET", "?scope=orders:read", narrow.access), 403, "palmgate", "insufficient_scope", "orders:read")
		expectRefusal(t, check("GET", "?scope=orders:read%20orders:write", full.access), 403, "palmgate", "insufficient_scope", "orders:read orders:write")
	})
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

// TestBearerExpiredToken checks that the issuer's own tokens expire exactly: a
// 10-second access token is admitted before its exp and refused a second past its
// exp (well within the old 30 s leeway) by userinfo,
// introspection, /oauth2/check and a local palmgate_bearer, with and without the
// verified-token cache; a remote palmgate_bearer keeps its leeway (30 s by default,
// `leeway 0` for none).
func TestBearerExpiredToken(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	shop := newOIDCClient("shop", "")
	site := "palmgate\n" + u.route("/api/*", "scope orders:read") + u.route("/nocache/*", "cache_size -1")
	// ttl: long enough for the seven checks before exp on a loaded machine.
	const ttl = 10
	e := start(t, oidcOptions([]oidcClient{shop}, site, fmt.Sprintf("access_token_ttl %ds", ttl)))
	remote := "{\n\tadmin 127.0.0.1:{adminport}\n\tpersist_config off\n}\nhttp://127.0.0.1:{port} {\n" +
		u.route("/lenient/*", "issuer "+e.URL+"/oauth2") + u.route("/exact/*", "issuer "+e.URL+"/oauth2", "leeway 0") + "}\n"
	r := start(t, testserver.Options{Caddyfile: remote})
	tok := e.tokensFor(t, shop, e.subject("alice"), "openid orders:read")
	claims := jwtPart(t, tok.access, 1)
	iat, _ := claims["iat"].(float64)
	exp, _ := claims["exp"].(float64)
	if exp-iat != ttl {
		t.Fatalf("access token iat %v exp %v, want a lifetime of %ds (access_token_ttl %ds)", iat, exp, ttl, ttl)
	}
	bearer := "Bearer " + tok.access
	// Before exp, everywhere (and now cached where there is a cache).
	u.call(t, e, "GET", "/api/a", bearer).expectAdmitted(t, tok, bearer)
	u.call(t, e, "GET", "/nocache/a", bearer).expectAdmitted(t, tok, bearer)
	u.call(t, r, "GET", "/lenient/a", bearer).expectAdmitted(t, tok, bearer)
	u.call(t, r, "GET", "/exact/a", bearer).expectAdmitted(t, tok, bearer)
	expectChecked(t, e.do(t, "GET", "/oauth2/check", nil, "Authorization", bearer), tok)
	e.do(t, "GET", "/oauth2/userinfo", nil, "Authorization", bearer).ExpectStatus(t, http.StatusOK)
	if m := e.introspect(t, shop, tok.access, true).ExpectStatus(t, http.StatusOK).Object(t); m["active"] != true {
		t.Fatalf("introspection before exp: %v, want active", m)
	}
	if time.Now().Unix() >= int64(exp) {
		t.Fatalf("the checks before exp took until %v, past exp %v: the test proves nothing", time.Now(), exp)
	}

	sleepUntil(time.Unix(int64(exp)+1, 0)) // a second past exp
	// First the remote with its leeway, so that its call comes well within the 30 s.
	u.call(t, r, "GET", "/lenient/a", bearer).expectAdmitted(t, tok, bearer) // remote: within its 30 s leeway
	u.call(t, e, "GET", "/api/a", bearer).expectRefused(t, 401, "palmgate", "invalid_token", "")
	u.call(t, e, "GET", "/nocache/a", bearer).expectRefused(t, 401, "palmgate", "invalid_token", "")
	expectRefusal(t, e.do(t, "GET", "/oauth2/check", nil, "Authorization", bearer), 401, "palmgate", "invalid_token", "")
	e.expectRevoked(t, tok.access) // userinfo: invalid_token
	expectInactive(t, e.introspect(t, shop, tok.access, true))
	u.call(t, r, "GET", "/exact/a", bearer).expectRefused(t, 401, "palmgate", "invalid_token", "")
	// A fresh token of the same server is admitted.
	fresh := e.tokensFor(t, shop, e.subject("bob"), "openid orders:read")
	u.call(t, e, "GET", "/nocache/b", "Bearer "+fresh.access).expectAdmitted(t, fresh, "Bearer "+fresh.access)
}

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

// TestBearerRevokedGrants checks that palmgate_bearer refuses the access tokens
// of a grant revoked by a reused code or by /oauth2/revoke, even when it has
// admitted (and cached) them before, and keeps admitting other grants. It does
// so with the issuer's shared verifier (/api), and with the verifiers a route
// builds for itself with `cache_size`: none (/nocache, -1) and its own (/small,
// 16), which must be given the revocation set too (issue 18, finding 11 b).
func TestBearerRevokedGrants(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	shop := newOIDCClient("shop", "")
	routes := []string{"/api", "/nocache", "/small"}
	e := start(t, oidcOptions([]oidcClient{shop}, "palmgate\n"+u.route("/api/*", "scope orders:read")+
		u.route("/nocache/*", "scope orders:read", "cache_size -1")+u.route("/small/*", "scope orders:read", "cache_size 16")))
	code := e.codeWithScope(t, shop, e.subject("alice"), "openid orders:read")
	reused := e.redeem(t, shop, code)
	revoked := e.tokensFor(t, shop, e.subject("bob"), "openid offline_access orders:read")
	kept := e.tokensFor(t, shop, e.subject("carol"), "openid offline_access orders:read")
	for _, route := range routes {
		for _, tok := range []tokenSet{reused, revoked, kept} {
			u.call(t, e, "GET", route+"/a", "Bearer "+tok.access).expectAdmitted(t, tok, "Bearer "+tok.access)
		}
	}

	expectOAuthError(t, e.postToken(t, url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"redirect_uri": {shop.redirects[0]}, "client_id": {shop.id}, "client_secret": {shop.secret}}), http.StatusBadRequest, "invalid_grant")
	for _, route := range routes {
		u.expectRefusedSoon(t, e, route+"/b", reused)
	}
	expectRefusal(t, e.do(t, "GET", "/oauth2/check", nil, "Authorization", "Bearer "+reused.access), 401, "palmgate", "invalid_token", "")

	expectRevokeOK(t, e.revoke(t, shop, revoked.refresh, true))
	for _, route := range routes {
		u.expectRefusedSoon(t, e, route+"/c", revoked)
	}

	for _, route := range routes {
		u.call(t, e, "GET", route+"/d", "Bearer "+kept.access).expectAdmitted(t, kept, "Bearer "+kept.access)
	}
	expectChecked(t, e.do(t, "GET", "/oauth2/check", nil, "Authorization", "Bearer "+kept.access), kept)
}

// TestBearerHandleErrors: palmgate_bearer returns its refusals to Caddy as HTTP
// errors, so that a site's handle_errors shapes them (here a JSON body with the
// status) while the RFC 6750 challenge set by the middleware stays.
func TestBearerHandleErrors(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	shop := newOIDCClient("shop", "")
	site := "palmgate\n" + u.route("/api/*", "scope orders:read") +
		"handle_errors {\nheader Content-Type application/json\nrespond `{\"shaped\":true,\"status\":{err.status_code}}`\n}\n"
	e := start(t, oidcOptions([]oidcClient{shop}, site))
	narrow := e.tokensFor(t, shop, e.subject("alice"), "openid")
	for _, tc := range []struct {
		name, authorization string
		status              int
		code, scope         string
	}{
		{"no token", "", 401, "", ""},
		{"bad token", "Bearer not-a-token", 401, "invalid_token", ""},
		{"scope not granted", "Bearer " + narrow.access, 403, "insufficient_scope", "orders:read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := u.call(t, e, "GET", "/api/x", tc.authorization)
			if p.seen != nil {
				t.Errorf("%s: the upstream was called for a refused request", p.Request)
			}
			if p.Status != tc.status {
				t.Errorf("%s: status %d, want %d", p.Request, p.Status, tc.status)
			}
			var m map[string]any
			if err := json.Unmarshal(p.Body, &m); err != nil || m["shaped"] != true || m["status"] != float64(tc.status) {
				t.Errorf("%s: body %s, want the handle_errors body with status %d", p.Request, testserver.Snippet(p.Body), tc.status)
			}
			expectChallenge(t, p.Response, tc.status, "palmgate", tc.code, tc.scope)
		})
	}
}
