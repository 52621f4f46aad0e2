package integration

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
	"github.com/palmgate/palmgate/internal/tooltest"
)

// apacheConf is the test's Apache configuration: mod_auth_openidc protecting
// /protected/ as a confidential client of palmgate, everything in {dir}.
// OIDCRedirectURI and the client's backchannel_logout_uri are the ones the
// README's Back-channel logout section shows, on the test's address.
const apacheConf = `ServerRoot {dir}
ServerName 127.0.0.1
Listen {addr}
PidFile {dir}/httpd.pid
ErrorLog {dir}/error.log
LogLevel warn auth_openidc:debug
DefaultRuntimeDir {dir}
Mutex posixsem
# -X serves one connection at a time: a browser's idle keep-alive would hold
# palmgate's POST for KeepAliveTimeout.
KeepAlive Off
User nobody
Group nogroup
LoadModule mpm_prefork_module {modules}/mod_mpm_prefork.so
LoadModule authn_core_module {modules}/mod_authn_core.so
LoadModule authz_core_module {modules}/mod_authz_core.so
LoadModule authz_user_module {modules}/mod_authz_user.so
LoadModule auth_openidc_module {modules}/mod_auth_openidc.so
DocumentRoot {dir}/htdocs
<Directory />
	AllowOverride None
</Directory>
<Directory {dir}/htdocs>
	Require all granted
</Directory>

OIDCProviderMetadataURL {issuer}/.well-known/openid-configuration
OIDCClientID {client_id}
OIDCClientSecret {client_secret}
OIDCRedirectURI http://{addr}/protected/redirect_uri
OIDCCryptoPassphrase {passphrase}
OIDCScope "openid"
OIDCProviderTokenEndpointAuth client_secret_basic
<Location /protected/>
	AuthType openid-connect
	Require valid-user
</Location>
`

// apacheBinary and apacheModules are Debian's apache2 and its modules (packages
// apache2 and libapache2-mod-auth-openidc).
const (
	apacheBinary  = "/usr/sbin/apache2"
	apacheModules = "/usr/lib/apache2/modules"
)

// startApache runs Apache in the foreground (-X: one process, as nginx's
// master_process off) with conf's placeholders {dir}, {addr} and {modules}
// filled, and waits until it accepts connections; it is killed when the test
// ends.
func startApache(t *testing.T, addr, conf string) {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // Apache serves as nobody
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "htdocs", "protected"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "htdocs", "protected", "page.html"), []byte("the protected page\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	conf = strings.NewReplacer("{dir}", dir, "{addr}", addr, "{modules}", apacheModules).Replace(conf)
	path := filepath.Join(dir, "httpd.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(apacheBinary, "-X", "-d", dir, "-f", path)
	cmd.Env = append(os.Environ(), "APACHE_RUN_DIR="+dir, "APACHE_LOCK_DIR="+dir, "APACHE_LOG_DIR="+dir)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting apache2: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	logs := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		return fmt.Sprintf("output:\n%s\nerror.log:\n%s", out.String(), b)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		if t.Failed() {
			t.Logf("apache2 %s", logs())
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		select {
		case <-done:
			t.Fatalf("apache2 exited before listening: %s", logs())
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("apache2 does not listen on %s after 10s: %s", addr, logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// apacheRP is Apache with mod_auth_openidc as a confidential client of palmgate
// with a backchannel_logout_uri: its address, callback and protected page, and
// the client's block for palmgate's Caddyfile (conf).
type apacheRP struct {
	client               oidcClient
	addr, redirect, page string
	conf                 string
}

func newApacheRP(t *testing.T) apacheRP {
	addr := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	redirect := "http://" + addr + "/protected/redirect_uri"
	c := newOIDCClient("apache-app", "")
	c.redirects, c.scopes = []string{redirect}, nil
	return apacheRP{client: c, addr: addr, redirect: redirect, page: "http://" + addr + "/protected/page.html",
		conf: strings.Replace(c.config(), "}\n", "backchannel_logout_uri "+redirect+"?logout=backchannel\n}\n", 1)}
}

// start starts Apache as rp, a client of palmgate's issuer.
func (rp apacheRP) start(t *testing.T, issuer string) {
	startApache(t, rp.addr, strings.NewReplacer("{issuer}", issuer, "{client_id}", rp.client.id,
		"{client_secret}", rp.client.secret, "{passphrase}", randHex(16)).Replace(apacheConf))
}

// apacheBrowser is one browser's cookies at Apache (mod_auth_openidc's state
// and session cookies); it follows no redirect.
type apacheBrowser struct {
	c *http.Client
}

func newApacheBrowser(t *testing.T) *apacheBrowser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &apacheBrowser{c: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// waitApacheSignedOut waits until b's Apache session for page is gone (the
// page sends it to palmgate's authorize again): the logout token goes out from
// palmgate's queue, and Apache acts on it when it arrives. what names the session.
func waitApacheSignedOut(t *testing.T, e *env, b *apacheBrowser, page, issuer, what string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		status, loc, _ := b.get(t, page)
		if status == http.StatusFound && strings.HasPrefix(loc, issuer+"/authorize?") {
			return
		}
		if status != http.StatusOK {
			t.Fatalf("%s: %d to %q, want 200 (not yet) or 302 to palmgate's authorize", what, status, loc)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still passes 20s later: no back-channel logout\npalmgate log:\n%s", what, e.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (b *apacheBrowser) get(t *testing.T, u string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A browser's navigation: mod_auth_openidc answers others 401, not a redirect.
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, resp.Header.Get("Location"), string(body)
}

// TestBackchannelLogoutModAuthOpenIDC: Apache with mod_auth_openidc, a
// confidential client of palmgate with a backchannel_logout_uri. Alice and Bob
// sign in through it (a dev-mode palm scan each) and reach the protected page.
// The operator ends Alice with revoke=grants: palmgate POSTs a logout token to
// mod_auth_openidc's redirect URI, which drops her session, so that her next
// request goes back to palmgate's authorize; Bob's session still passes.
func TestBackchannelLogoutModAuthOpenIDC(t *testing.T) {
	tooltest.Apache.Need(t)
	rp := newApacheRP(t)
	e := startOIDC(t, nil, rp.conf)
	issuer := e.URL + "/oauth2"
	rp.start(t, issuer)
	page, redirect := rp.page, rp.redirect

	signIn := func(name string) *apacheBrowser {
		t.Helper()
		b := newApacheBrowser(t)
		status, loc, body := b.get(t, page)
		if status != http.StatusFound || !strings.HasPrefix(loc, issuer+"/authorize?") {
			t.Fatalf("%s, before signing in: %d to %q, want 302 to palmgate's authorize\n%s", name, status, loc, testserver.Snippet([]byte(body)))
		}
		q := e.login(t, loc, e.subject(name), redirect)
		status, loc, body = b.get(t, redirect+"?"+q.Encode())
		if status != http.StatusFound || loc != page {
			t.Fatalf("%s, the callback: %d to %q, want 302 to %s\n%s", name, status, loc, page, testserver.Snippet([]byte(body)))
		}
		if status, _, body := b.get(t, page); status != http.StatusOK || body != "the protected page\n" {
			t.Fatalf("%s, signed in: %d %q, want the protected page", name, status, body)
		}
		return b
	}
	alice := signIn("alice")
	aliceID := loginsAudited(t, e, 1)[0]
	bob := signIn("bob")

	testserver.Do(t, "DELETE", "http://"+e.AdminAddr+"/palmgate/humans/"+aliceID+"/sessions?revoke=grants", nil).
		ExpectStatus(t, http.StatusOK)
	waitApacheSignedOut(t, e, alice, page, issuer, "alice's Apache session, after the operator ended her")
	if status, loc, _ := bob.get(t, page); status != http.StatusOK {
		t.Errorf("bob after alice's end: %d to %q, want his session to pass", status, loc)
	}
	// One token sent (alice had one grant, of this client), none failed or dropped;
	// the sender reports after Apache's answer: wait for the count.
	for deadline := time.Now().Add(20 * time.Second); ; {
		m := scrapeDomain(t, e)
		sent := m[`palmgate_backchannel_logouts_total{outcome="sent"}`]
		if sent == 1 && m[`palmgate_backchannel_logouts_total{outcome="failed"}`] == 0 && m[`palmgate_backchannel_logouts_total{outcome="dropped"}`] == 0 {
			break
		}
		if sent > 1 || time.Now().After(deadline) {
			t.Fatalf("palmgate_backchannel_logouts_total: %v, want sent 1, failed and dropped 0", m)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if log := e.Log(); strings.Contains(log, "backchannel logout failed") || strings.Contains(log, "backchannel logout dropped") {
		t.Errorf("palmgate logged a failed or dropped back-channel logout:\n%s", log)
	}
}

// TestBackchannelLogoutDynamicClient: a client the operator creates through the
// admin API names a backchannel_logout_uri (http on loopback: the operator's
// clients may); an RP-initiated logout with its id_token_hint POSTs it one
// logout token of that login; the CLI shows and removes the URI, and the admin
// API refuses one with a fragment.
func TestBackchannelLogoutDynamicClient(t *testing.T) {
	type received struct {
		contentType, token string
	}
	got := make(chan received, 10)
	rp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		got <- received{r.Header.Get("Content-Type"), r.PostForm.Get("logout_token")}
	}))
	t.Cleanup(rp.Close)
	e := startOIDC(t, nil)
	bcl := rp.URL + "/bcl?app=1"
	c, m := e.adminCreate(t, map[string]any{"name": "BCL App", "redirect_uris": []string{"https://bcl-app.example/cb"},
		"backchannel_logout_uri": bcl})
	if str(m["backchannel_logout_uri"]) != bcl {
		t.Fatalf("created client %v; want backchannel_logout_uri %s", m, bcl)
	}
	tok := e.tokensFor(t, c, e.subject("ann"), "openid offline_access")
	e.do(t, "GET", "/oauth2/logout?"+url.Values{"id_token_hint": {tok.id}}.Encode(), nil).ExpectStatus(t, http.StatusOK)
	var r received
	select {
	case r = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("no logout token 20s after the logout")
	}
	header, claims, idClaims := jwtPart(t, r.token, 0), jwtPart(t, r.token, 1), jwtPart(t, tok.id, 1)
	events, _ := claims["events"].(map[string]any)
	if r.contentType != "application/x-www-form-urlencoded" || str(header["typ"]) != "logout+jwt" || str(header["alg"]) != "RS256" ||
		fmt.Sprint(claims["aud"]) != "["+c.id+"]" || str(claims["sid"]) != str(idClaims["sid"]) || str(claims["sub"]) != tok.sub ||
		str(claims["iss"]) != e.URL+"/oauth2" || events["http://schemas.openid.net/event/backchannel-logout"] == nil || claims["nonce"] != nil {
		t.Errorf("logout token: %s, header %v, claims %v; want the login's sid and sub", r.contentType, header, claims)
	}

	if out := e.cli(t, "show", c.id); !regexp.MustCompile(`(?m)^backchannel_logout_uri +` + regexp.QuoteMeta(bcl) + `$`).MatchString(out) {
		t.Errorf("client show lacks the back-channel logout URI:\n%s", out)
	}
	e.cli(t, "update", c.id, "--backchannel-logout-uri", "")
	if out := e.cli(t, "show", c.id); strings.Contains(out, bcl) {
		t.Errorf("client update --backchannel-logout-uri \"\" left it:\n%s", out)
	}
	resp := testserver.Do(t, "POST", "http://"+e.AdminAddr+"/palmgate/clients", map[string]any{"name": "x",
		"redirect_uris": []string{"https://a.example/cb"}, "backchannel_logout_uri": "https://a.example/bcl#x"}, "Origin", "http://"+e.AdminAddr)
	if resp.Status != http.StatusBadRequest || !strings.Contains(string(resp.Body), "backchannel_logout_uri") {
		t.Errorf("a backchannel_logout_uri with a fragment: %d %s; want 400 naming it", resp.Status, resp.Body)
	}
}
