package integration

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/palmgate/palmgate/internal/testserver"
	"github.com/palmgate/palmgate/internal/tooltest"
)

// oauth2ProxyFlags are the flags docs/GATEWAYS.md gives for oauth2-proxy in front of
// an upstream, with palmgate as its OpenID Connect provider. {issuer} is palmgate's
// base URL (the `issuer` option), {proxy} oauth2-proxy's own, {upstream} the
// protected service's.
var oauth2ProxyFlags = []string{
	"--provider=oidc",
	"--oidc-issuer-url={issuer}/oauth2",
	"--client-id=oauth2-proxy",
	"--client-secret={secret}",
	"--redirect-url={proxy}/oauth2/callback",
	"--scope=openid offline_access",
	"--oidc-email-claim=sub",
	"--email-domain=*",
	"--code-challenge-method=S256",
	"--backend-logout-url={issuer}/oauth2/logout?id_token_hint={id_token}",
	"--skip-provider-button",
	"--pass-access-token",
	"--cookie-secret={cookie_secret}",
	"--cookie-refresh=1m",
	"--upstream={upstream}",
}

// oauth2ProxyBearerFlags are the flags docs/GATEWAYS.md adds for bearer mode: API
// clients send palmgate access tokens (ES256, aud the issuer's base URL when asked
// without `resource`) to oauth2-proxy directly.
var oauth2ProxyBearerFlags = []string{
	"--skip-jwt-bearer-tokens",
	"--extra-jwt-issuers={issuer}/oauth2={issuer}",
}

// oauth2ProxyTestFlags are the test's own: plain HTTP on loopback, a cookie
// refreshed after 2 s so that the test sees a refresh, no banner.
var oauth2ProxyTestFlags = []string{
	"--http-address={listen}",
	"--cookie-secure=false",
	"--cookie-refresh=2s",
}

// headerEcho is the protected upstream: a page showing who oauth2-proxy says the
// user is, and the access token it passed; it records the last one.
type headerEcho struct {
	mu     sync.Mutex
	tokens []string
	auth   []string
}

func (h *headerEcho) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.tokens = append(h.tokens, r.Header.Get("X-Forwarded-Access-Token"))
	h.auth = append(h.auth, r.Header.Get("Authorization"))
	h.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, `<!doctype html><title>upstream</title><p id="rp-done">user %s</p>`, html.EscapeString(r.Header.Get("X-Forwarded-User")))
}

func (h *headerEcho) lastToken() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.tokens) == 0 {
		return ""
	}
	return h.tokens[len(h.tokens)-1]
}

// TestRelyingPartyOAuth2Proxy puts oauth2-proxy v7 (integration/rp/oauth2proxy, its
// own module) in front of an upstream with the flags of docs/GATEWAYS.md: a
// browser logs in through it, the session refreshes, the access token it passes
// works at userinfo, a palmgate access token is taken as a bearer token (bearer
// mode: oauth2-proxy verifies it with the algorithms discovery lists, ES256 among
// them), and its sign-out ends the login at palmgate.
func TestRelyingPartyOAuth2Proxy(t *testing.T) {
	t.Parallel()
	tooltest.Chromium.Need(t)
	bin := tooltest.OAuth2Proxy.Need(t, "..")
	expectGatewaysDoc(t)

	up := &headerEcho{}
	upstream := httptest.NewServer(up)
	t.Cleanup(upstream.Close)
	port := testserver.FreePort(t)
	proxy := fmt.Sprintf("http://127.0.0.1:%d", port)
	c := oidcClient{id: "oauth2-proxy", secret: "secret-" + randHex(16), name: "oauth2-proxy",
		redirects: []string{proxy + "/oauth2/callback"}}
	e := startOIDC(t, []oidcClient{c})
	r := strings.NewReplacer("{issuer}", e.URL, "{secret}", c.secret, "{proxy}", proxy, "{upstream}", upstream.URL,
		"{cookie_secret}", randHex(16), "{listen}", fmt.Sprintf("127.0.0.1:%d", port))
	var args []string
	for _, f := range slices.Concat(oauth2ProxyFlags, oauth2ProxyBearerFlags, oauth2ProxyTestFlags) {
		if f == "--cookie-refresh=1m" {
			continue // the test's 2s instead
		}
		args = append(args, r.Replace(f))
	}
	cmd := exec.Command(bin, args...)
	p := startOAuth2Proxy(t, cmd, port)

	ctx := startChromium(t)
	done := simulateLogin(t, ctx, proxy+"/", e.subject("proxy-user"), "#rp-done")
	first := up.lastToken()
	sub := str(jwtPart(t, first, 1)["sub"])
	if !subRE.MatchString(sub) || done != "user "+sub {
		t.Fatalf("the upstream shows %q with access token sub %q: want X-Forwarded-User = the pairwise sub", done, sub)
	}
	e.expectUserinfo(t, first, sub)

	// The session cookie is older than --cookie-refresh: oauth2-proxy refreshes.
	// It does so on a request past that age: reload until it has, at most 10 s.
	refreshed := first
	for deadline := time.Now().Add(10 * time.Second); refreshed == first && time.Now().Before(deadline); {
		time.Sleep(time.Second)
		browserStep(t, ctx, "reloading after --cookie-refresh", chromedp.Navigate(proxy+"/"), chromedp.WaitVisible(chromedp.ID("rp-done")))
		refreshed = up.lastToken()
	}
	if refreshed == first || refreshed == "" {
		t.Fatalf("oauth2-proxy did not refresh the session: the upstream got the same access token\n%s", p.String())
	}
	e.expectUserinfo(t, refreshed, sub)

	t.Run("bearer mode", func(t *testing.T) {
		bearerCall := func(token string) (int, string) {
			req, _ := http.NewRequest("GET", proxy+"/", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}
		// A fresh access token of another login, never seen by oauth2-proxy's session.
		api := e.tokensFor(t, c, e.subject("api-client"), "openid")
		status, body := bearerCall(api.access)
		if status != http.StatusOK || !strings.Contains(body, "user "+api.sub) {
			t.Errorf("a palmgate access token as bearer at oauth2-proxy: status %d body %q, want 200 from the upstream for user %s\n%s", status, body, api.sub, p.String())
		}
		if status, _ := bearerCall(tamper(api.access)); status == http.StatusOK {
			t.Errorf("a tampered access token as bearer at oauth2-proxy: status 200, want a refusal")
		}
	})

	// Sign-out: oauth2-proxy calls the backend logout URL with the ID token; the
	// login ends at palmgate.
	browserStep(t, ctx, "signing out at oauth2-proxy", chromedp.Navigate(proxy+"/oauth2/sign_out"))
	e.expectRevoked(t, refreshed)
	browserStep(t, ctx, "coming back after sign-out: the login page again",
		chromedp.Navigate(proxy+"/"), chromedp.WaitVisible(chromedp.ID("simulate-button")))
}

// startOAuth2Proxy runs oauth2-proxy and waits until it answers its /ping.
func startOAuth2Proxy(t *testing.T, cmd *exec.Cmd, port int) *logBuffer {
	t.Helper()
	log := &logBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting oauth2-proxy: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("oauth2-proxy output:\n%s", log.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/ping", port))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return log
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("oauth2-proxy did not answer /ping within 30 s:\n%s", log.String())
	return nil
}

// gatewaysDocValues are the example values docs/GATEWAYS.md shows for the
// placeholders of oauth2ProxyFlags.
var gatewaysDocValues = strings.NewReplacer(
	"{issuer}", "https://id.example.com", "{secret}", "$OAUTH2_PROXY_CLIENT_SECRET",
	"{proxy}", "https://app.example.com", "{upstream}", "http://127.0.0.1:8080",
	"{cookie_secret}", "$OAUTH2_PROXY_COOKIE_SECRET")

// expectGatewaysDoc checks that docs/GATEWAYS.md gives every flag of
// oauth2ProxyFlags and oauth2ProxyBearerFlags (with gatewaysDocValues; a value with a space, `?`, `*`, `$`
// or a brace in double quotes), so that the documented command is the tested one.
func expectGatewaysDoc(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile("../docs/GATEWAYS.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, f := range slices.Concat(oauth2ProxyFlags, oauth2ProxyBearerFlags) {
		f = gatewaysDocValues.Replace(f)
		if name, value, ok := strings.Cut(f, "="); ok && strings.ContainsAny(value, " ?*${") {
			f = name + `="` + value + `"`
		}
		if !strings.Contains(doc, " "+f+" \\\n") && !strings.Contains(doc, " "+f+"\n") {
			t.Errorf("docs/GATEWAYS.md lacks the oauth2-proxy flag line %s", f)
		}
	}
}

// TestRelyingPartyOAuth2ProxyStockScopes runs oauth2-proxy as it ships: no --scope
// flag, so it asks for its default `openid email profile`, which palmgate grants
// without claims (issue 21, item 1); a browser logs in and the upstream sees the
// pairwise sub. Its client has access_token_audience client_id, so bearer mode
// takes palmgate's access tokens with no --extra-jwt-issuers flag: oauth2-proxy
// checks aud against its client_id by default (issue 21, item 2).
func TestRelyingPartyOAuth2ProxyStockScopes(t *testing.T) {
	t.Parallel()
	tooltest.Chromium.Need(t)
	bin := tooltest.OAuth2Proxy.Need(t, "..")

	up := &headerEcho{}
	upstream := httptest.NewServer(up)
	t.Cleanup(upstream.Close)
	port := testserver.FreePort(t)
	proxy := fmt.Sprintf("http://127.0.0.1:%d", port)
	c := oidcClient{id: "oauth2-proxy", secret: "secret-" + randHex(16), name: "oauth2-proxy",
		redirects: []string{proxy + "/oauth2/callback"}, accessAud: "client_id"}
	e := startOIDC(t, []oidcClient{c})
	r := strings.NewReplacer("{issuer}", e.URL, "{secret}", c.secret, "{proxy}", proxy, "{upstream}", upstream.URL,
		"{cookie_secret}", randHex(16), "{listen}", fmt.Sprintf("127.0.0.1:%d", port))
	var args []string
	for _, f := range slices.Concat(oauth2ProxyFlags, []string{"--skip-jwt-bearer-tokens"}, oauth2ProxyTestFlags) {
		if strings.HasPrefix(f, "--scope=") || strings.HasPrefix(f, "--cookie-refresh=") {
			continue // its default scopes; no refresh token to refresh with
		}
		args = append(args, r.Replace(f))
	}
	p := startOAuth2Proxy(t, exec.Command(bin, args...), port)

	ctx := startChromium(t)
	done := simulateLogin(t, ctx, proxy+"/", e.subject("stock-proxy-user"), "#rp-done")
	token := up.lastToken()
	claims := jwtPart(t, token, 1)
	sub := str(claims["sub"])
	if !subRE.MatchString(sub) || done != "user "+sub {
		t.Fatalf("the upstream shows %q with access token sub %q: want X-Forwarded-User = the pairwise sub\n%s", done, sub, p.String())
	}
	if got := str(claims["scope"]); got != "email openid profile" {
		t.Errorf("oauth2-proxy's default scopes were granted as %q, want email openid profile", got)
	}

	// Bearer mode, with no flag but --skip-jwt-bearer-tokens: aud is the client_id.
	api := e.tokensFor(t, c, e.subject("stock-api-client"), "openid")
	req, _ := http.NewRequest("GET", proxy+"/", nil)
	req.Header.Set("Authorization", "Bearer "+api.access)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "user "+api.sub) {
		t.Errorf("an access token with aud = client_id as bearer at oauth2-proxy: status %d body %q, want 200 for user %s\n%s", resp.StatusCode, body, api.sub, p.String())
	}
}
