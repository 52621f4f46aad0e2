// Command mcp is a small MCP server (the official Go SDK, streamable HTTP) meant to
// run behind palmgate_bearer: its one tool, whoami, answers with the pairwise id of
// the palm-verified person whose token the request carried, which palmgate_bearer
// puts in the X-Palmgate-Sub request header (and X-Palmgate-Client-Id, the MCP
// client's id). See Caddyfile beside this file and the README's "Put an MCP server
// behind palmgate".
//
// The server trusts those headers: it must only be reachable through Caddy. It
// listens on a loopback address by default, and keeps the SDK's DNS-rebinding
// protection (the Caddyfile sends the upstream's own host as Host).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The headers palmgate_bearer sets on admitted requests (edge.HeaderSub,
// edge.HeaderClientID and edge.HeaderAgentID; an example does not import
// palmgate).
const (
	headerSub      = "X-Palmgate-Sub"
	headerClientID = "X-Palmgate-Client-Id"
	headerAgentID  = "X-Palmgate-Agent-Id"
)

// WhoAmI is the answer of the whoami tool.
type WhoAmI struct {
	// Sub is the caller's pairwise id: stable for this person and this client's
	// sector, and no other's.
	Sub string `json:"sub" jsonschema:"the pairwise id of the palm-verified person"`
	// ClientID is the MCP client the person authorised.
	ClientID string `json:"client_id" jsonschema:"the OAuth client_id of the MCP client"`
	// AgentID is the registered agent acting for the person, when the token is
	// an agent's (palmgate_bearer { agents allow }); "" when the person calls.
	AgentID string `json:"agent_id,omitempty" jsonschema:"the deviceId of the agent acting for the person, if any"`
}

// whoami reads the identity palmgate_bearer set on the HTTP request.
func whoami(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, WhoAmI, error) {
	var h http.Header
	if req.Extra != nil {
		h = req.Extra.Header
	}
	who := WhoAmI{Sub: h.Get(headerSub), ClientID: h.Get(headerClientID), AgentID: h.Get(headerAgentID)}
	if who.Sub == "" {
		return nil, WhoAmI{}, errors.New("no " + headerSub + " header: this server must run behind palmgate_bearer")
	}
	text := "you are " + who.Sub
	if who.AgentID != "" {
		text += ", through your agent " + who.AgentID
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, who, nil
}

// newServer is the MCP server with its tool.
func newServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "palmgate-whoami", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "whoami", Description: "Tells the pairwise id of the palm-verified person calling."}, whoami)
	return s
}

// handler serves the MCP endpoint at /mcp.
func handler() http.Handler {
	server := newServer()
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	return mux
}

func main() {
	listen := flag.String("listen", "127.0.0.1:9400", "address to listen on (keep it loopback: the identity headers are trusted)")
	flag.Parse()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("mcp: %v", err)
	}
	// The first line is the server's base URL (integration/mcp_test.go reads it).
	fmt.Printf("http://%s\n", ln.Addr())
	srv := &http.Server{Handler: handler(), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("mcp: %v", err)
	}
}
