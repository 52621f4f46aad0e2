package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callMCPTool is `token -call <MCP endpoint> -mcp-tool <name>`: it opens an MCP
// session at endpoint with the official Go SDK, the agent's token on every request,
// calls the tool without arguments and returns its result (the JSON of the
// tools/call result); a result marked as an error is an error too.
func callMCPTool(ctx context.Context, client *http.Client, endpoint, token, tool string) (json.RawMessage, error) {
	withToken := *client
	withToken.Transport = bearerTransport{base: client.Transport, token: token}
	c := mcp.NewClient(&mcp.Implementation{Name: "palmgate-example-agent", Version: "1.0.0"}, nil)
	session, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &withToken}, nil)
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	defer session.Close()
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
	if err != nil {
		return nil, fmt.Errorf("tools/call %s: %w", tool, err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	if res.IsError {
		return b, fmt.Errorf("tools/call %s: the tool failed: %s", tool, b)
	}
	return b, nil
}

// bearerTransport sends the agent's token with every request of an MCP session.
type bearerTransport struct {
	base  http.RoundTripper // nil: http.DefaultTransport
	token string
}

func (t bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}
