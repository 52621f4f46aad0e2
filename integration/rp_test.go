package integration

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/palmgate/palmgate/internal/testserver"
	"github.com/palmgate/palmgate/internal/tooltest"
)

// The relying parties people deploy, each logging in through headless Chromium
// with the login page's "Simulate palm scan" button (dev mode), then refreshing,
// reading userinfo and logging out. They are built or installed from their own
// pinned manifests under integration/rp, not from palmgate's go.mod.

// rpStep bounds each browser step.
const rpStep = 30 * time.Second

// browserStep runs actions with rpStep as their deadline, failing the test with
// what the browser shows when they fail.
func browserStep(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, rpStep)
	defer cancel()
	if err := chromedp.Do(c, actions...); err != nil {
		lc, cancel2 := context.WithTimeout(ctx, 5*time.Second)
		defer cancel2()
		loc, _ := chromedp.Run(lc, chromedp.Location())
		text, _ := chromedp.Run(lc, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		t.Fatalf("%s: %v\nthe browser is at %s, showing:\n%s", what, err, loc, text)
	}
}

// simulateLogin opens start in the browser, which must reach palmgate's login page;
// there it simulates the palm scan of subject, and waits until the relying party's
// page shows doneSel. It returns that element's text.
func simulateLogin(t *testing.T, ctx context.Context, start, subject, doneSel string) string {
	t.Helper()
	browserStep(t, ctx, "opening "+start+" and reaching the login page",
		chromedp.Navigate(start),
		chromedp.WaitVisible(chromedp.ID("simulate-button")),
		chromedp.SetValue(chromedp.CSS(`input[name="palmSubject"]`), subject),
		chromedp.Click(chromedp.ID("simulate-button")),
	)
	browserStep(t, ctx, "coming back to the relying party after the palm scan", chromedp.WaitVisible(chromedp.CSS(doneSel)))
	c, cancel := context.WithTimeout(ctx, rpStep)
	defer cancel()
	text, err := chromedp.Run(c, chromedp.Text(chromedp.CSS(doneSel)))
	if err != nil {
		t.Fatalf("reading %s: %v", doneSel, err)
	}
	return text
}

// rpProcess is a relying party running as a child process.
type rpProcess struct {
	base string
	log  *logBuffer
}

type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startRP runs cmd, which prints its base URL on its first line of stdout; it is
// killed when the test ends, and its output is logged if the test failed.
func startRP(t *testing.T, cmd *exec.Cmd) *rpProcess {
	t.Helper()
	p := &rpProcess{log: &logBuffer{}}
	cmd.Stderr = p.log
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", cmd.Path, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(cmd.Path), p.log.String())
		}
	})
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			first <- sc.Text()
		}
		close(first)
		_, _ = io.Copy(p.log, stdout)
	}()
	select {
	case line, ok := <-first:
		if !ok || !strings.HasPrefix(line, "http://127.0.0.1:") {
			time.Sleep(200 * time.Millisecond)
			t.Fatalf("%s did not start (first line %q):\n%s", cmd.Path, line, p.log.String())
		}
		p.base = line
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not print its URL within 60 s:\n%s", cmd.Path, p.log.String())
	}
	return p
}

// get calls the relying party's path and decodes its JSON answer; it fails the
// test unless the status is want.
func (p *rpProcess) get(t *testing.T, path string, want int) map[string]any {
	t.Helper()
	resp, err := http.Get(p.base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("relying party GET %s: status %d, want %d: %s", path, resp.StatusCode, want, body)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("relying party GET %s: %v: %s", path, err, body)
	}
	return m
}

// rpClient is the client my-app of a relying party on port: its callback
// /auth/callback and its post-logout page /logged-out.
func rpClient(port int) oidcClient {
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	return oidcClient{
		id: "my-app", secret: "secret-" + randHex(16), name: "My App",
		redirects: []string{base + "/auth/callback"}, postLogout: []string{base + "/logged-out"},
	}
}

// exerciseRP runs the scenario every relying party of the same shape (rp.mjs, the
// zitadel command) goes through: login in the browser, userinfo, refresh, logout
// in the browser; then palmgate refuses what the logout ended.
func exerciseRP(t *testing.T, e *env, c oidcClient, rp *rpProcess) {
	t.Helper()
	ctx := startChromium(t)
	done := simulateLogin(t, ctx, rp.base+"/login", e.subject("rp-user"), "#rp-done")
	first := rp.get(t, "/tokens", http.StatusOK)
	sub := str(first["sub"])
	if !subRE.MatchString(sub) || done != "signed in as "+sub {
		t.Fatalf("the relying party shows %q; tokens %v: want a pairwise sub", done, first)
	}
	for _, k := range []string{"access_token", "refresh_token", "id_token"} {
		if str(first[k]) == "" {
			t.Fatalf("the relying party holds no %s: %v", k, first)
		}
	}
	if info := rp.get(t, "/userinfo", http.StatusOK); str(info["sub"]) != sub {
		t.Errorf("userinfo through the relying party: %v, want sub %s", info, sub)
	}

	refreshed := rp.get(t, "/refresh", http.StatusOK)
	if str(refreshed["access_token"]) == str(first["access_token"]) || str(refreshed["refresh_token"]) == str(first["refresh_token"]) || str(refreshed["refresh_token"]) == "" {
		t.Errorf("refresh kept the tokens: %v", refreshed)
	}
	if info := rp.get(t, "/userinfo", http.StatusOK); str(info["sub"]) != sub {
		t.Errorf("userinfo after refresh: %v, want sub %s", info, sub)
	}
	e.expectUserinfo(t, str(refreshed["access_token"]), sub)

	browserStep(t, ctx, "logging out through the relying party",
		chromedp.Navigate(rp.base+"/logout"),
		chromedp.WaitVisible(chromedp.ID("rp-out")),
	)
	// The login ended: its access token, its refresh token.
	e.expectRevoked(t, str(refreshed["access_token"]))
	expectOAuthError(t, e.refresh(t, c, str(refreshed["refresh_token"])), http.StatusBadRequest, "invalid_grant")
	rp.get(t, "/userinfo", http.StatusInternalServerError)
}

// TestRelyingPartyOpenIDClient: Node's openid-client v6 (integration/rp/openidclient,
// installed with npm ci from its committed package-lock.json), whose code between
// the README markers is the README's Node snippet.
func TestRelyingPartyOpenIDClient(t *testing.T) {
	t.Parallel()
	node := tooltest.Node.Need(t)
	tooltest.Chromium.Need(t)
	npmCI(t, "rp/openidclient")
	port := testserver.FreePort(t)
	c := rpClient(port)
	e := startOIDC(t, []oidcClient{c})
	cmd := exec.Command(node, "rp.mjs")
	cmd.Dir = "rp/openidclient"
	cmd.Env = append(os.Environ(), "ISSUER="+e.URL+"/oauth2", "MY_APP_SECRET="+c.secret, fmt.Sprintf("PORT=%d", port))
	exerciseRP(t, e, c, startRP(t, cmd))
}

// TestRelyingPartyZitadel: github.com/zitadel/oidc/v3's rp package
// (integration/rp/zitadel, its own module), with the client's ID tokens in each
// algorithm palmgate offers (id_token_signed_response_alg): zitadel verifies them
// with rp.WithSigningAlgsFromDiscovery.
func TestRelyingPartyZitadel(t *testing.T) {
	t.Parallel()
	tooltest.Chromium.Need(t)
	bin := tooltest.ZitadelRP.Need(t, "..")
	for _, alg := range []string{"", "ES256", "EdDSA"} {
		t.Run(cmp.Or(alg, "RS256 (default)"), func(t *testing.T) {
			port := testserver.FreePort(t)
			c := rpClient(port)
			c.idTokenAlg = alg
			e := startOIDC(t, []oidcClient{c})
			cmd := exec.Command(bin)
			cmd.Env = append(os.Environ(), "ISSUER="+e.URL+"/oauth2", "CLIENT_ID="+c.id, "CLIENT_SECRET="+c.secret, fmt.Sprintf("PORT=%d", port))
			rp := startRP(t, cmd)
			exerciseRP(t, e, c, rp)
			if h := jwtPart(t, str(rp.get(t, "/tokens", http.StatusOK)["id_token"]), 0); h["alg"] != cmp.Or(alg, "RS256") {
				t.Errorf("the ID token zitadel verified has alg %v, want %s", h["alg"], cmp.Or(alg, "RS256"))
			}
		})
	}
}

var npmOnce struct {
	sync.Mutex
	done map[string]error
}

// npmCI installs dir's packages from its committed package-lock.json, once per
// test process.
func npmCI(t *testing.T, dir string) {
	t.Helper()
	npmOnce.Lock()
	defer npmOnce.Unlock()
	err, ok := npmOnce.done[dir]
	if !ok {
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		if out, e := cmd.CombinedOutput(); e != nil {
			err = fmt.Errorf("npm ci in %s: %v\n%s", dir, e, out)
		}
		if npmOnce.done == nil {
			npmOnce.done = map[string]error{}
		}
		npmOnce.done[dir] = err
	}
	if err != nil {
		tooltest.Missing(t, err.Error())
	}
}
