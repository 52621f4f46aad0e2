package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// mcpProtocolVersion is the MCP revision the agent asks for in initialize.
const mcpProtocolVersion = "2025-06-18"

// mcpSession is a minimal MCP client over the streamable HTTP transport: enough
// to initialize, call one tool and end the session, with the agent's token on
// every request. A real agent would use an MCP SDK; this one keeps the example
// to the standard library.
type mcpSession struct {
	client   *http.Client
	endpoint string
	token    string
	id       string // Mcp-Session-Id, once the server gave one
	version  string // the protocol version the server chose
}

// rpcResponse is a JSON-RPC response.
type rpcResponse struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// callMCPTool is `token -call <MCP endpoint> -mcp-tool <name>`: it initializes
// a session at endpoint with token, calls the tool without arguments and
// returns its result (the JSON of the tools/call result).
func callMCPTool(ctx context.Context, client *http.Client, endpoint, token, tool string) (json.RawMessage, error) {
	s := &mcpSession{client: client, endpoint: endpoint, token: token}
	init, err := s.request(ctx, 1, "initialize", map[string]any{
		"protocolVersion": mcpProtocolVersion, "capabilities": map[string]any{},
		"clientInfo": map[string]string{"name": "palmgate-example-agent", "version": "1.0.0"},
	})
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	var info struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(init, &info); err != nil || info.ProtocolVersion == "" {
		return nil, fmt.Errorf("initialize: no protocol version in %s", init)
	}
	s.version = info.ProtocolVersion
	defer s.end()
	if _, err := s.post(ctx, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); err != nil {
		return nil, fmt.Errorf("notifications/initialized: %w", err)
	}
	res, err := s.request(ctx, 2, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{}})
	if err != nil {
		return nil, fmt.Errorf("tools/call %s: %w", tool, err)
	}
	var r struct {
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, fmt.Errorf("tools/call %s: %w", tool, err)
	}
	if r.IsError {
		return res, fmt.Errorf("tools/call %s: the tool failed: %s", tool, res)
	}
	return res, nil
}

// request sends a JSON-RPC request and returns its result.
func (s *mcpSession) request(ctx context.Context, id int, method string, params any) (json.RawMessage, error) {
	resp, err := s.post(ctx, map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r *rpcResponse
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mediaType {
	case "application/json":
		r = new(rpcResponse)
		err = json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(r)
	case "text/event-stream":
		r, err = readEventResponse(io.LimitReader(resp.Body, maxBody), id)
	default:
		return nil, fmt.Errorf("HTTP %d with Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	switch {
	case err != nil:
		return nil, err
	case r.Error != nil:
		return nil, fmt.Errorf("error %d: %s", r.Error.Code, r.Error.Message)
	case r.Result == nil:
		return nil, errors.New("an answer without a result")
	}
	return r.Result, nil
}

// readEventResponse reads server-sent events until the JSON-RPC response to id.
func readEventResponse(body io.Reader, id int) (*rpcResponse, error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), maxBody)
	var data []string // the data lines of the event being read
	ours := func() *rpcResponse {
		var r rpcResponse
		if err := json.Unmarshal([]byte(strings.Join(data, "\n")), &r); err == nil && string(r.ID) == fmt.Sprint(id) {
			return &r
		}
		data = data[:0] // a notification or a request of the server: not ours
		return nil
	}
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "data:"); ok {
			data = append(data, strings.TrimPrefix(v, " "))
			continue
		}
		if line != "" || len(data) == 0 {
			continue // another field, or an event without data
		}
		if r := ours(); r != nil {
			return r, nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(data) > 0 { // the stream ended without the event's blank line
		if r := ours(); r != nil {
			return r, nil
		}
	}
	return nil, errors.New("the event stream ended without the response")
}

// post sends one JSON-RPC message; a status other than 200 or 202 is an error.
func (s *mcpSession) post(ctx context.Context, msg any) (*http.Response, error) {
	b, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	s.headers(req)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, fmt.Errorf("HTTP %d %s: %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), bytes.TrimSpace(body))
	}
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		s.id = id
	}
	if resp.StatusCode == http.StatusAccepted {
		resp.Body.Close()
	}
	return resp, nil
}

// headers sets the token and, once known, the session and the protocol version.
func (s *mcpSession) headers(req *http.Request) {
	req.Header.Set("Authorization", "Bearer "+s.token)
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
	}
	if s.version != "" {
		req.Header.Set("MCP-Protocol-Version", s.version)
	}
}

// end asks the server to end the session (best effort: a server may refuse).
func (s *mcpSession) end() {
	if s.id == "" {
		return
	}
	req, err := http.NewRequest(http.MethodDelete, s.endpoint, nil)
	if err != nil {
		return
	}
	s.headers(req)
	if resp, err := s.client.Do(req); err == nil {
		resp.Body.Close()
	}
}
