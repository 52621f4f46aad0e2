package integration

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
	"github.com/palmgate/palmgate/internal/tooltest"
)

// nginxBinary is Debian's nginx (package nginx, with the auth_request module).
const nginxBinary = "/usr/sbin/nginx"

// nginxExample is the server block docs/GATEWAYS.md shows; the test runs it as
// it is, with only its listen address and upstream addresses replaced.
const nginxExample = "../docs/examples/nginx-palmgate.conf"

// nginxMain is the rest of the test's nginx.conf: everything in {dir}.
const nginxMain = `daemon off;
master_process off;
pid {dir}/nginx.pid;
error_log {dir}/error.log info;
events {
	worker_connections 64;
}
http {
	access_log {dir}/access.log;
	client_body_temp_path {dir}/client_body;
	proxy_temp_path {dir}/proxy;
	fastcgi_temp_path {dir}/fastcgi;
	uwsgi_temp_path {dir}/uwsgi;
	scgi_temp_path {dir}/scgi;
{server}
}
`

// startNginx runs nginx with the example server block in front of upstream,
// palmgate being its sidecar (both host:port), and waits until it accepts
// connections; it is killed when the test ends. It returns nginx's base URL.
func startNginx(t *testing.T, palmgate, upstream string) string {
	t.Helper()
	example, err := os.ReadFile(nginxExample)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(example, []byte("\nserver {"))
	if i < 0 {
		t.Fatalf("%s: no server block", nginxExample)
	}
	server := string(example[i+1:])
	if doc, err := os.ReadFile("../docs/GATEWAYS.md"); err != nil {
		t.Error(err)
	} else if !strings.Contains(string(doc), server) {
		t.Errorf("docs/GATEWAYS.md must show the server block of %s as it is", nginxExample)
	}
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	for _, r := range [][2]string{{"listen 80;", "listen " + addr + ";"},
		{"http://palmgate:8080/", "http://" + palmgate + "/"}, {"http://orders:9000;", "http://" + upstream + ";"}} {
		if strings.Count(server, r[0]) != 1 {
			t.Fatalf("%s: want %q exactly once", nginxExample, r[0])
		}
		server = strings.Replace(server, r[0], r[1], 1)
	}
	conf := strings.NewReplacer("{dir}", dir, "{server}", server).Replace(nginxMain)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	// -e: the error log nginx opens before it reads the configuration.
	cmd := exec.Command(nginxBinary, "-p", dir, "-c", path, "-e", filepath.Join(dir, "error.log"))
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting nginx: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	logs := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		return fmt.Sprintf("config:\n%s\noutput:\n%s\nerror.log:\n%s", conf, out.String(), b)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		if t.Failed() {
			t.Logf("nginx %s", logs())
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		select {
		case <-done:
			t.Fatalf("nginx exited before listening: %s", logs())
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return "http://" + addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx does not listen on %s after 10s: %s", addr, logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// nginxSidecar runs palmgate as docs/GATEWAYS.md shows for a sidecar: a
// site with no host name, so that every Host a gateway sends reaches it.
const nginxSidecar = `{
	admin 127.0.0.1:{adminport}
	persist_config off
	palmgate {
		issuer http://127.0.0.1:{port}
		storage badger {datadir}/palmgate
		dev
		rate_limit off
		{clients}
	}
}
:{port} {
	palmgate
}
`

// nginxUpstream is the protected upstream: it records the requests that reach it.
type nginxUpstream struct {
	mu   sync.Mutex
	seen []nginxSeen
}

type nginxSeen struct {
	*http.Request
	body string
}

func (rec *nginxUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.seen = append(rec.seen, nginxSeen{r.Clone(r.Context()), string(body)})
	rec.mu.Unlock()
	fmt.Fprintf(w, "upstream saw %s", r.URL.Path)
}

// take returns the requests seen since the last call and forgets them.
func (rec *nginxUpstream) take() []nginxSeen {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	seen := rec.seen
	rec.seen = nil
	return seen
}

// nginxToken logs subject in at client c with scope and returns the access token.
func (e *env) nginxToken(t *testing.T, c oidcClient, subject, scope string) string {
	t.Helper()
	q := e.login(t, e.authURL(c, "scope", scope), subject, c.redirects[0])
	tokens := e.exchange(t, c, q.Get("code"), "")
	if got := str(tokens["scope"]); got != scope {
		t.Fatalf("token scope %q, want %q", got, scope)
	}
	return str(tokens["access_token"])
}

// TestNginxAuthRequest puts a real nginx in front of a service, with palmgate's
// /oauth2/check as its auth_request: the configuration docs/GATEWAYS.md shows.
func TestNginxAuthRequest(t *testing.T) {
	tooltest.Nginx.Need(t)
	c := newOIDCClient("orders-app", "")
	e := start(t, testserver.Options{Caddyfile: strings.Replace(nginxSidecar, "{clients}", c.config(), 1)})
	rec := &nginxUpstream{}
	upstream := httptest.NewServer(rec)
	t.Cleanup(upstream.Close)
	pg, _ := url.Parse(e.URL)
	up, _ := url.Parse(upstream.URL)
	gw := startNginx(t, pg.Host, up.Host)

	subject := e.subject("alice")
	good := e.nginxToken(t, c, subject, "openid orders:read")
	narrow := e.nginxToken(t, c, subject, "openid")
	sub := str(e.userinfo(t, good).ExpectStatus(t, http.StatusOK).Object(t)["sub"])
	if !subRE.MatchString(sub) {
		t.Fatalf("userinfo sub %q is not a pairwise subject", sub)
	}

	// Admitted: the upstream sees the token's identity, and nothing a client sent
	// in its place.
	for _, method := range []string{"GET", "POST"} {
		resp := e.do(t, method, gw+"/api/orders", `{"item":1}`, "Authorization", "Bearer "+good,
			"X-User-Sub", "mallory", "X-User-Scope", "admin", "X-User-Client-Id", "evil")
		resp.ExpectStatus(t, http.StatusOK)
		if string(resp.Body) != "upstream saw /api/orders" {
			t.Errorf("%s: body %q, want the upstream's answer", resp.Request, resp.Body)
		}
		seen := rec.take()
		if len(seen) != 1 {
			t.Fatalf("%s: upstream got %d requests, want 1", resp.Request, len(seen))
		}
		h := seen[0].Header
		if seen[0].Method != method || seen[0].body != `{"item":1}` {
			t.Errorf("upstream saw %s with body %q, want %s with the client's body", seen[0].Method, seen[0].body, method)
		}
		if got := h.Values("X-User-Sub"); len(got) != 1 || got[0] != sub {
			t.Errorf("%s: upstream saw X-User-Sub %q, want exactly [%q] (the userinfo sub)", resp.Request, got, sub)
		}
		if got := h.Values("X-User-Scope"); len(got) != 1 || got[0] != "openid orders:read" {
			t.Errorf("%s: upstream saw X-User-Scope %q, want [\"openid orders:read\"]", resp.Request, got)
		}
		if got := h.Values("X-User-Client-Id"); len(got) != 1 || got[0] != c.id {
			t.Errorf("%s: upstream saw X-User-Client-Id %q, want [%q]", resp.Request, got, c.id)
		}
	}

	// Refused: nginx answers with palmgate's status and challenge, and the
	// upstream never hears of the request.
	revoked := e.nginxToken(t, c, subject, "openid orders:read")
	form := url.Values{"token": {revoked}, "client_id": {c.id}, "client_secret": {c.secret}}
	e.do(t, "POST", "/oauth2/revoke", form.Encode(), "Content-Type", "application/x-www-form-urlencoded").ExpectStatus(t, http.StatusOK)
	tampered := []byte(good) // one signature character changed
	if tampered[len(tampered)-10] = 'A'; good[len(good)-10] == 'A' {
		tampered[len(tampered)-10] = 'B'
	}
	refusals := []struct {
		name, auth string
		status     int
		challenge  string // "" for exactly Bearer realm="palmgate"
	}{
		{"no token", "", http.StatusUnauthorized, ""},
		{"basic credentials", basicAuth(c.id, c.secret), http.StatusUnauthorized, ""},
		{"garbage token", "Bearer not-a-jwt", http.StatusUnauthorized, `error="invalid_token"`},
		{"tampered token", "Bearer " + string(tampered), http.StatusUnauthorized, `error="invalid_token"`},
		{"revoked token", "Bearer " + revoked, http.StatusUnauthorized, `error="invalid_token"`},
		{"token without orders:read", "Bearer " + narrow, http.StatusForbidden, `error="insufficient_scope", scope="orders:read"`},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			resp := e.do(t, "GET", gw+"/api/orders", nil, "Authorization", tc.auth, "X-User-Sub", sub)
			if resp.Status != tc.status {
				t.Errorf("%s: status %d, want %d\nbody: %s", resp.Request, resp.Status, tc.status, testserver.Snippet(resp.Body))
			}
			expectBearerChallenge(t, resp, tc.challenge)
			if n := len(rec.take()); n != 0 {
				t.Errorf("%s: the upstream got %d requests, want none", resp.Request, n)
			}
		})
	}

	// The check location is internal: clients cannot call it through nginx.
	e.do(t, "GET", gw+"/_palmgate_check", nil, "Authorization", "Bearer "+good).ExpectStatus(t, http.StatusNotFound)

	// The sidecar site answers for any Host (a Host Caddy serves no site for
	// would get an empty 200, which every gateway takes as "admitted").
	req, _ := http.NewRequest("GET", e.URL+"/oauth2/check?scope=orders:read", nil)
	req.Host = "palmgate:8080"
	resp, err := testserver.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /oauth2/check with Host palmgate:8080 and no token: status %d, want 401", resp.StatusCode)
	}

	// palmgate down: nginx fails closed (500), the upstream hears nothing.
	e.Stop()
	e.do(t, "GET", gw+"/api/orders", nil, "Authorization", "Bearer "+good).ExpectStatus(t, http.StatusInternalServerError)
	if n := len(rec.take()); n != 0 {
		t.Errorf("the upstream got %d requests, want none", n)
	}
}
