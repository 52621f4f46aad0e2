package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/palmgate/palmgate/internal/testserver"
)

// bearerTransport sends every request with its access token.
type bearerTransport string

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// callWhoami connects the official Go SDK client to the MCP server at mcpURL
// with token as its bearer token, calls whoami and returns its answer.
func callWhoami(t *testing.T, mcpURL, token string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), mcpStep)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "palmgate-agent-test", Version: "1.0.0"}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: mcpURL,
		HTTPClient: &http.Client{Timeout: mcpStep, Transport: bearerTransport(token)}}, nil)
	if err != nil {
		t.Fatalf("connecting the Go SDK client with the token: %v", err)
	}
	defer session.Close()
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("CallTool whoami: %+v, %v", res, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var who map[string]string
	if err := json.Unmarshal(b, &who); err != nil {
		t.Fatalf("whoami answered %s: %v", b, err)
	}
	return who
}

// TestAgentCallsMCPTool (issue 24): a person lets their agent act for them towards
// an MCP client with the MCP server's resource (requested_actor and resource, a
// palm scan); the agent obtains a token for that resource with its own key
// (jwt-bearer) and calls examples/mcp's whoami tool, behind `palmgate_bearer {
// resource ...; agents allow }`, with the official Go SDK client, then as
// examples/agent `token -mcp-tool whoami`: the tool answers with the person's
// pairwise sub, the client and the agent. The person's own token reaches the tool
// without an agent. The same agent's token from a grant without the resource is
// refused by the site, and a token for another resource by the token endpoint.
func TestAgentCallsMCPTool(t *testing.T) {
	t.Parallel()
	assistant := newOIDCClient("mcp-assistant", "")
	shop := newOIDCClient("mcp-shop", "")
	port := testserver.FreePort(t)
	mcpURL := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	upstream := startMCPExample(t)
	site := fmt.Sprintf("palmgate\nhandle /mcp* {\npalmgate_bearer {\nresource %s\nagents allow\n}\n"+
		"reverse_proxy %s {\nheader_up Host {upstream_hostport}\n}\n}", mcpURL, strings.TrimPrefix(upstream.base, "http://"))
	opts := oidcOptions([]oidcClient{assistant, shop}, site)
	opts.Port = port
	e := start(t, opts)
	alice := e.subject("agent-mcp-alice")
	bot := newAgent(t, "mcp-bot-"+randHex(4))
	e.register(t, bot, alice)

	// Alice lets the agent act for her towards the assistant, for the MCP server.
	q := e.login(t, e.authURL(assistant, "scope", "openid orders:read", "requested_actor", bot.deviceID, "resource", mcpURL), alice, assistant.redirects[0])
	if q.Get("code") == "" {
		t.Fatalf("alice's consent: callback %v, want a code", q)
	}
	person := e.redeem(t, assistant, q.Get("code"))

	// The agent's token for the resource, with its key.
	resp := e.agentToken(t, assistant, e.agentAssertion(t, bot), "scope", "orders:read", "resource", mcpURL).ExpectStatus(t, http.StatusOK)
	access := str(resp.Object(t)["access_token"])
	expectAudience(t, access, mcpURL)

	// The agent calls the tool: the person, the client and the agent.
	who := callWhoami(t, mcpURL, access)
	if who["sub"] != person.sub || who["client_id"] != assistant.id || who["agent_id"] != bot.deviceID {
		t.Errorf("whoami through the agent answered %v; want sub %s (alice's at the assistant), client_id %s, agent_id %s",
			who, person.sub, assistant.id, bot.deviceID)
	}
	// The reference agent does the same with `token -mcp-tool`.
	out := runExampleAgent(t, bot, "token", "-server", e.URL, "-device", bot.deviceID, "-client", assistant.id, "-secret", assistant.secret,
		"-resource", mcpURL, "-call", mcpURL, "-mcp-tool", "whoami")
	for _, want := range []string{`"sub":"` + person.sub + `"`, `"client_id":"` + assistant.id + `"`, `"agent_id":"` + bot.deviceID + `"`} {
		if !strings.Contains(out, want) {
			t.Errorf("examples/agent token -mcp-tool whoami printed no %s:\n%s", want, out)
		}
	}
	// Alice herself: the same sub, no agent.
	if who := callWhoami(t, mcpURL, person.access); who["sub"] != person.sub || who["agent_id"] != "" {
		t.Errorf("whoami with alice's own token answered %v; want sub %s and no agent", who, person.sub)
	}

	// The same agent's token from a grant without the resource: refused by the MCP site.
	other := e.consentAgent(t, shop, alice, bot)
	r := testserver.Do(t, "POST", mcpURL, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
		"Authorization", "Bearer "+other, "Accept", "application/json, text/event-stream")
	if r.Status != http.StatusUnauthorized || !strings.Contains(r.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("an agent's token without the MCP resource: %d %q, want 401 invalid_token", r.Status, r.Header.Get("WWW-Authenticate"))
	}
	// A token for another resource is not issued under the grant.
	expectOAuthError(t, e.agentToken(t, assistant, e.agentAssertion(t, bot), "resource", "https://orders.example/api"),
		http.StatusBadRequest, "invalid_target")
}
