package main

import (
	"context"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestWhoAmI: the tool answers with the identity palmgate_bearer set on the
// request, and refuses a request that did not come through it.
func TestWhoAmI(t *testing.T) {
	h := http.Header{}
	h.Set(headerSub, "pairwise-sub")
	h.Set(headerClientID, "mcp-client")
	res, who, err := whoami(context.Background(), &mcp.CallToolRequest{Extra: &mcp.RequestExtra{Header: h}}, struct{}{})
	if err != nil || who.Sub != "pairwise-sub" || who.ClientID != "mcp-client" || who.AgentID != "" || res == nil {
		t.Errorf("whoami = %+v, %+v, %v", res, who, err)
	}
	// An agent's token: the agent's id comes with the person's.
	h.Set(headerAgentID, "agent-7")
	if _, who, err := whoami(context.Background(), &mcp.CallToolRequest{Extra: &mcp.RequestExtra{Header: h}}, struct{}{}); err != nil || who.AgentID != "agent-7" || who.Sub != "pairwise-sub" {
		t.Errorf("whoami for an agent = %+v, %v", who, err)
	}
	for name, req := range map[string]*mcp.CallToolRequest{
		"no header": {Extra: &mcp.RequestExtra{Header: http.Header{}}},
		"no HTTP":   {},
	} {
		if _, _, err := whoami(context.Background(), req, struct{}{}); err == nil {
			t.Errorf("%s: answered without an identity", name)
		}
	}
}
