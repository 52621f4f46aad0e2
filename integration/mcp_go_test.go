package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/palmgate/palmgate/internal/tooltest"
)

// TestMCPGoSDK (issue 23): the official Go SDK's client (go-sdk v1.8.0, whose
// auth.AuthorizationCodeHandler runs the MCP authorization flow) connects to
// examples/mcp behind palmgate_bearer as the TypeScript SDK does: the 401, the
// resource and authorization server metadata, the code flow with PKCE and
// `resource` through headless Chromium with a simulated palm scan (a static
// public client), then the tool call answers with the person's pairwise id.
func TestMCPGoSDK(t *testing.T) {
	t.Parallel()
	tooltest.Chromium.Need(t)
	cb, codes := mcpCallback(t)
	mcpClient := oidcClient{id: "mcp-go", name: "MCP Go client", public: true, redirects: []string{cb.URL + "/callback"}}
	e, mcpURL := mcpSite(t, []oidcClient{mcpClient})
	browser := startChromium(t)
	person := e.subject("mcp-go-person")

	fetcher := func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		u, err := url.Parse(args.URL)
		if err != nil {
			return nil, err
		}
		if q := u.Query(); q.Get("resource") != mcpURL || q.Get("code_challenge_method") != "S256" {
			t.Errorf("authorization request %v: want resource %s and PKCE S256", q, mcpURL)
		}
		simulateLogin(t, browser, args.URL, person, "#mcp-done")
		select {
		case q := <-codes:
			return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
		case <-time.After(mcpStep):
			t.Fatal("the browser did not reach the MCP client's callback")
			return nil, nil
		}
	}
	handler, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		PreregisteredClient:      &oauthex.ClientCredentials{ClientID: mcpClient.id, Issuer: e.URL + "/oauth2"},
		RedirectURL:              cb.URL + "/callback",
		AuthorizationCodeFetcher: fetcher,
	})
	if err != nil {
		t.Fatalf("NewAuthorizationCodeHandler: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*mcpStep)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "palmgate-mcp-go-test", Version: "1.0.0"}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: mcpURL, OAuthHandler: handler, HTTPClient: &http.Client{Timeout: mcpStep}}, nil)
	if err != nil {
		t.Fatalf("connecting the Go SDK client: %v", err)
	}
	defer session.Close()
	tools, err := session.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "whoami" {
		t.Fatalf("ListTools: %+v, %v; want whoami", tools, err)
	}
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("CallTool: %+v, %v", res, err)
	}
	ts, err := handler.TokenSource(ctx)
	if err != nil || ts == nil {
		t.Fatalf("TokenSource: %v", err)
	}
	tok, err := ts.Token()
	if err != nil {
		t.Fatalf("Token: %v", err)
	}
	expectAudience(t, tok.AccessToken, mcpURL)
	sub := str(jwtPart(t, tok.AccessToken, 1)["sub"])
	b, _ := json.Marshal(res.StructuredContent)
	var who map[string]string
	if err := json.Unmarshal(b, &who); err != nil || sub == "" || who["sub"] != sub || who["client_id"] != mcpClient.id {
		t.Errorf("whoami answered %s (%v); want the pairwise sub %q of the token and client_id %s", b, err, sub, mcpClient.id)
	}
}
