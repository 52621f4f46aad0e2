package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
	"github.com/palmgate/palmgate/internal/tooltest"
)

// mcpStep bounds each step of the MCP client (npm's first start, the SDK's
// discovery and token requests) on a loaded machine.
const mcpStep = 90 * time.Second

// mcpSite starts examples/mcp (built from this module) and a Caddy whose site
// serves palmgate and, under /mcp, the MCP server behind palmgate_bearer with
// its resource, as examples/mcp/Caddyfile does. It returns the server and the
// MCP URL. clients are the static clients (the MCP client among them).
func mcpSite(t *testing.T, clients []oidcClient, global ...string) (*env, string) {
	t.Helper()
	return mcpSiteWith(t, clients, nil, global...)
}

// mcpSiteWith is mcpSite with env added to the Caddy process's environment.
func mcpSiteWith(t *testing.T, clients []oidcClient, env []string, global ...string) (*env, string) {
	t.Helper()
	return mcpSiteBearer(t, clients, env, "resource {base}/mcp", global...)
}

// mcpSiteBearer is mcpSiteWith with the palmgate_bearer block's body given, in
// which {base} stands for the site's base URL.
func mcpSiteBearer(t *testing.T, clients []oidcClient, env []string, bearer string, global ...string) (*env, string) {
	t.Helper()
	upstream := startMCPExample(t)
	port := testserver.FreePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	site := fmt.Sprintf(`palmgate
handle /mcp* {
palmgate_bearer {
%s
}
reverse_proxy %s {
header_up Host {upstream_hostport}
}
}`, strings.ReplaceAll(bearer, "{base}", base), strings.TrimPrefix(upstream.base, "http://"))
	opts := oidcOptions(clients, site, global...)
	opts.Port, opts.Env = port, env
	e := start(t, opts)
	return e, base + "/mcp"
}

// startMCPExample builds examples/mcp and starts it on a loopback port for t,
// returning the server.
func startMCPExample(t *testing.T) *rpProcess {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mcp")
	build := exec.Command("go", "build", "-o", bin, "../examples/mcp")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building examples/mcp: %v\n%s", err, out)
	}
	return startRP(t, exec.Command(bin, "-listen", "127.0.0.1:0"))
}

// mcpRun is the TypeScript SDK client (integration/rp/mcp/client.mjs) running.
type mcpRun struct {
	stdin  io.WriteCloser
	lines  chan string
	mu     sync.Mutex
	output []string
}

func (m *mcpRun) seen() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.output...)
}

// next returns the next line with prefix (without it), failing the test on an
// ERROR line, the end of the output or a step's timeout.
func (m *mcpRun) next(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(mcpStep)
	for {
		select {
		case line, ok := <-m.lines:
			if !ok {
				t.Fatalf("the MCP client ended before printing %s; its output:\n%s", prefix, strings.Join(m.seen(), "\n"))
			}
			if strings.HasPrefix(line, "ERROR ") {
				t.Fatalf("the MCP client failed: %s\nits output:\n%s", line, strings.Join(m.seen(), "\n"))
			}
			if rest, ok := strings.CutPrefix(line, prefix+" "); ok {
				return rest
			}
		case <-timeout:
			t.Fatalf("the MCP client printed no %s within %s; its output:\n%s", prefix, mcpStep, strings.Join(m.seen(), "\n"))
		}
	}
}

func startMCPClient(t *testing.T, node, mcpURL, redirect, clientID string) *mcpRun {
	t.Helper()
	cmd := exec.Command(node, "client.mjs", mcpURL, redirect, clientID)
	cmd.Dir = "rp/mcp"
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &logBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the MCP client: %v", err)
	}
	m := &mcpRun{stdin: stdin, lines: make(chan string, 64)}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			m.mu.Lock()
			m.output = append(m.output, sc.Text())
			m.mu.Unlock()
			m.lines <- sc.Text()
		}
		close(m.lines)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("MCP client stderr:\n%s", stderr.String())
		}
	})
	return m
}

// mcpCallback is the MCP client's loopback redirect URI, served by the test: it
// hands the code the browser brings to the test.
func mcpCallback(t *testing.T) (*httptest.Server, chan url.Values) {
	t.Helper()
	got := make(chan url.Values, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" {
			http.NotFound(w, r)
			return
		}
		select {
		case got <- r.URL.Query():
		default:
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, `<!doctype html><title>done</title><p id="mcp-done">back at the MCP client</p>`)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

// mcpResult is what the MCP client prints as RESULT: the tools it listed and
// whoami's answer.
type mcpResult struct {
	Tools  []string `json:"tools"`
	Result struct {
		IsError           bool              `json:"isError"`
		StructuredContent map[string]string `json:"structuredContent"`
		Content           []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
}

// signIn takes the authorization URL the client printed, signs person in
// through Chromium with a simulated palm scan, hands the code that reached the
// client's callback (codes) to the client, and returns the access token it got
// and what it printed as RESULT.
func (m *mcpRun) signIn(t *testing.T, ctx context.Context, authorize, person string, codes <-chan url.Values) (string, mcpResult) {
	t.Helper()
	simulateLogin(t, ctx, authorize, person, "#mcp-done")
	var back url.Values
	select {
	case back = <-codes:
	case <-time.After(mcpStep):
		t.Fatal("the browser did not reach the MCP client's callback")
	}
	if back.Get("code") == "" {
		t.Fatalf("callback %v: no code", back)
	}
	if _, err := io.WriteString(m.stdin, back.Get("code")+"\n"); err != nil {
		t.Fatal(err)
	}
	token := m.next(t, "TOKEN")
	var result mcpResult
	if err := json.Unmarshal([]byte(m.next(t, "RESULT")), &result); err != nil {
		t.Fatalf("the MCP client's result: %v", err)
	}
	return token, result
}

// TestMCPTypeScriptSDK (issue 23): the official MCP TypeScript SDK client
// (@modelcontextprotocol/sdk from integration/rp/mcp's lockfile) connects to
// examples/mcp behind palmgate_bearer: it gets the 401 naming the resource
// metadata, reads that document (served by the palmgate handler: the bearer sits
// in `handle /mcp*`) and palmgate's RFC 8414 metadata, runs the authorization code
// flow with PKCE and `resource` (no openid, prompt=consent) through headless
// Chromium with a simulated palm scan, lists the tools and calls whoami, which
// answers with the person's pairwise id. The client is a static public client
// (dynamic registration is another part of issue 23). A token of the same person
// for another resource is refused by the MCP site.
func TestMCPTypeScriptSDK(t *testing.T) {
	t.Parallel()
	node := tooltest.Node.Need(t)
	tooltest.Chromium.Need(t)
	npmCI(t, "rp/mcp")
	cb, codes := mcpCallback(t)
	const otherAPI = "https://orders.example/api"
	mcpClient := oidcClient{id: "mcp-client", name: "MCP client", public: true, redirects: []string{cb.URL + "/callback"}}
	shop := newOIDCClient("shop", "mcp-client") // the same sector: the same pairwise id
	shop.resources = []string{otherAPI}
	e, mcpURL := mcpSite(t, []oidcClient{mcpClient, shop})
	ctx := startChromium(t)

	run := startMCPClient(t, node, mcpURL, cb.URL+"/callback", mcpClient.id)
	authorize, err := url.Parse(run.next(t, "AUTHORIZE"))
	if err != nil {
		t.Fatal(err)
	}
	q := authorize.Query()
	if q.Get("resource") != mcpURL || q.Get("code_challenge_method") != "S256" || q.Get("client_id") != mcpClient.id {
		t.Errorf("authorization request %v: want resource %s, PKCE S256 and client_id %s", q, mcpURL, mcpClient.id)
	}
	if !strings.HasPrefix(authorize.String(), e.URL+"/oauth2/authorize?") {
		t.Errorf("authorization endpoint %s, want palmgate's", authorize)
	}
	person := e.subject("mcp-person")
	token, result := run.signIn(t, ctx, authorize.String(), person, codes)

	claims := jwtPart(t, token, 1)
	sub := str(claims["sub"])
	expectAudience(t, token, mcpURL)
	if sub == "" || result.Result.IsError || result.Result.StructuredContent["sub"] != sub || result.Result.StructuredContent["client_id"] != mcpClient.id {
		t.Errorf("whoami answered %+v; want the pairwise sub %q of the token and client_id %s", result.Result, sub, mcpClient.id)
	}
	if len(result.Tools) != 1 || result.Tools[0] != "whoami" {
		t.Errorf("tools %v, want [whoami]", result.Tools)
	}

	// What the SDK fetched: the 401, the resource metadata at the URL the 401
	// named, palmgate's RFC 8414 metadata, the token endpoint; never an empty 200.
	fetched := strings.Join(run.seen(), "\n")
	for _, want := range []string{
		"FETCH POST 401 " + mcpURL,
		"FETCH GET 200 " + e.URL + "/.well-known/oauth-protected-resource/mcp",
		"FETCH GET 200 " + e.URL + "/.well-known/oauth-authorization-server/oauth2",
		"FETCH POST 200 " + e.URL + "/oauth2/token",
	} {
		if !strings.Contains(fetched, want) {
			t.Errorf("the SDK's requests lack %q:\n%s", want, fetched)
		}
	}
	resp := e.do(t, "GET", "/.well-known/oauth-protected-resource/mcp", nil).ExpectStatus(t, http.StatusOK).Object(t)
	if resp["resource"] != mcpURL || fmt.Sprint(resp["authorization_servers"]) != "["+e.URL+"/oauth2]" || fmt.Sprint(resp["bearer_methods_supported"]) != "[header]" {
		t.Errorf("resource metadata %v", resp)
	}

	t.Run("a token for another resource is refused", func(t *testing.T) {
		q := e.login(t, e.authURL(shop, "resource", otherAPI), person, shop.redirects[0])
		form := url.Values{"grant_type": {"authorization_code"}, "code": {q.Get("code")}, "redirect_uri": {shop.redirects[0]},
			"client_id": {shop.id}, "client_secret": {shop.secret}}
		other := str(e.postToken(t, form).ExpectStatus(t, http.StatusOK).Object(t)["access_token"])
		if str(jwtPart(t, other, 1)["sub"]) != sub {
			t.Fatalf("the other token is not the same person's (sector)")
		}
		for _, tok := range []string{other, ""} {
			r := testserver.Do(t, "POST", mcpURL, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
				"Authorization", "Bearer "+tok, "Accept", "application/json, text/event-stream")
			if r.Status != http.StatusUnauthorized {
				t.Fatalf("token %.10q: %d, want 401", tok, r.Status)
			}
			if h := r.Header.Get("WWW-Authenticate"); !strings.Contains(h, `resource_metadata="`+e.URL+`/.well-known/oauth-protected-resource/mcp"`) {
				t.Errorf("challenge %q lacks the resource metadata URL", h)
			}
		}
		ok := testserver.Do(t, "POST", mcpURL, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize",
			"params": map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}},
			"Authorization", "Bearer "+token, "Accept", "application/json, text/event-stream")
		if ok.Status != http.StatusOK {
			t.Errorf("the SDK's own token: %d %s, want 200", ok.Status, testserver.Snippet(ok.Body))
		}
	})
}

// TestMCPTypeScriptSDKRegisters (issue 23): the same SDK client with no client of
// its own registers itself through RFC 7591 (`registration open`: the
// registration_endpoint of palmgate's metadata), gets a public client for its
// loopback redirect URI, and with it runs the flow to the tool call: the MCP
// client a person installs needs nothing from the operator but the MCP URL.
func TestMCPTypeScriptSDKRegisters(t *testing.T) {
	t.Parallel()
	node := tooltest.Node.Need(t)
	tooltest.Chromium.Need(t)
	npmCI(t, "rp/mcp")
	cb, codes := mcpCallback(t)
	e, mcpURL := mcpSite(t, nil, "registration open")
	ctx := startChromium(t)

	run := startMCPClient(t, node, mcpURL, cb.URL+"/callback", "register")
	clientID := run.next(t, "CLIENT")
	authorize, err := url.Parse(run.next(t, "AUTHORIZE"))
	if err != nil {
		t.Fatal(err)
	}
	if q := authorize.Query(); q.Get("client_id") != clientID || q.Get("resource") != mcpURL {
		t.Errorf("authorization request %v: want the registered client_id %s and resource %s", q, clientID, mcpURL)
	}
	token, result := run.signIn(t, ctx, authorize.String(), e.subject("mcp-registered"), codes)
	sub := str(jwtPart(t, token, 1)["sub"])
	if sub == "" || result.Result.StructuredContent["sub"] != sub || result.Result.StructuredContent["client_id"] != clientID {
		t.Errorf("whoami answered %+v; want the pairwise sub %q and the registered client_id %s", result.Result, sub, clientID)
	}
	fetched := strings.Join(run.seen(), "\n")
	if !strings.Contains(fetched, "FETCH POST 201 "+e.URL+"/oauth2/register") {
		t.Errorf("the SDK did not register at palmgate's registration endpoint:\n%s", fetched)
	}
}

// TestMCPTypeScriptSDKMetadataDocument (issue 23): the same SDK client offers the
// https URL of its client ID metadata document as its client_id (palmgate's
// metadata says client_id_metadata_document_supported); palmgate fetches the
// document from a test server over https (trusted through SSL_CERT_FILE, on a
// loopback address the operator allows), and the flow reaches the tool with that
// URL as the client.
func TestMCPTypeScriptSDKMetadataDocument(t *testing.T) {
	t.Parallel()
	node := tooltest.Node.Need(t)
	tooltest.Chromium.Need(t)
	npmCI(t, "rp/mcp")
	cb, codes := mcpCallback(t)
	var srv *httptest.Server
	fetchedDoc := make(chan struct{}, 16)
	srv, certFile := docServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/mcp-client.json" {
			http.NotFound(w, r)
			return
		}
		fetchedDoc <- struct{}{}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"client_id": srv.URL + "/mcp-client.json", "client_name": "MCP doc client",
			"redirect_uris": []string{cb.URL + "/callback"}, "token_endpoint_auth_method": "none",
			"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
		})
	})
	docURL := srv.URL + "/mcp-client.json"
	e, mcpURL := mcpSiteWith(t, nil, []string{"SSL_CERT_FILE=" + certFile}, "client_metadata_documents on {\nallow_private\n}")
	ctx := startChromium(t)

	run := startMCPClient(t, node, mcpURL, cb.URL+"/callback", "metadata:"+docURL)
	authorize, err := url.Parse(run.next(t, "AUTHORIZE"))
	if err != nil {
		t.Fatal(err)
	}
	if q := authorize.Query(); q.Get("client_id") != docURL || q.Get("resource") != mcpURL {
		t.Errorf("authorization request %v: want client_id %s (the document's URL) and resource %s", q, docURL, mcpURL)
	}
	token, result := run.signIn(t, ctx, authorize.String(), e.subject("mcp-doc"), codes)
	select {
	case <-fetchedDoc:
	default:
		t.Error("palmgate never fetched the client's metadata document")
	}
	sub := str(jwtPart(t, token, 1)["sub"])
	if sub == "" || result.Result.StructuredContent["sub"] != sub || result.Result.StructuredContent["client_id"] != docURL {
		t.Errorf("whoami answered %+v; want the pairwise sub %q and client_id %s", result.Result, sub, docURL)
	}
}
