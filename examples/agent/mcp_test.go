package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpServer is an MCP server of the official Go SDK (events, or JSON answers with
// jsonResponse) whose tool whoami answers with the request's bearer token and
// fails is a tool that fails; a request without "Bearer tok" is a 401, and
// unauthorized counts them.
func mcpServer(t *testing.T, jsonResponse bool) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1.0.0"}, nil)
	type who struct {
		Token string `json:"token"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "whoami"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, who, error) {
		return nil, who{Token: req.Extra.Header.Get("Authorization")}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "fails"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, who, error) {
		return nil, who{}, errors.New("it failed")
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{JSONResponse: jsonResponse})
	var unauthorized atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			unauthorized.Add(1)
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &unauthorized
}

// TestCallMCPTool: the agent's MCP call (the Go SDK's client) sends its token with
// every request, calls a tool and reads its result, from an event stream or a JSON
// answer; a failing tool, an unknown tool and a refused token are errors.
func TestCallMCPTool(t *testing.T) {
	ctx := context.Background()
	for _, jsonResponse := range []bool{false, true} {
		srv, unauthorized := mcpServer(t, jsonResponse)
		res, err := callMCPTool(ctx, srv.Client(), srv.URL, "tok", "whoami")
		if err != nil || !strings.Contains(string(res), `"structuredContent":{"token":"Bearer tok"}`) {
			t.Errorf("json %t: whoami: %s, %v; want the token the tool saw", jsonResponse, res, err)
		}
		if n := unauthorized.Load(); n != 0 {
			t.Errorf("json %t: %d requests without the token", jsonResponse, n)
		}
		if _, err := callMCPTool(ctx, srv.Client(), srv.URL, "tok", "fails"); err == nil || !strings.Contains(err.Error(), "it failed") {
			t.Errorf("json %t: a failing tool: %v", jsonResponse, err)
		}
		if _, err := callMCPTool(ctx, srv.Client(), srv.URL, "tok", "nosuch"); err == nil || !strings.Contains(err.Error(), "tools/call nosuch") {
			t.Errorf("json %t: an unknown tool: %v", jsonResponse, err)
		}
		if _, err := callMCPTool(ctx, srv.Client(), srv.URL, "wrong", "whoami"); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
			t.Errorf("json %t: a refused token: %v", jsonResponse, err)
		}
	}
}

// TestTokenMCPToolNeedsCall: -mcp-tool without -call is refused before any request.
func TestTokenMCPToolNeedsCall(t *testing.T) {
	var out strings.Builder
	err := run(context.Background(), []string{"token", "-key", t.TempDir() + "/k.pem", "-client", "shop", "-mcp-tool", "whoami"}, &out)
	if err == nil || !strings.Contains(err.Error(), "-mcp-tool needs -call") {
		t.Fatalf("token -mcp-tool without -call: %v", err)
	}
}
