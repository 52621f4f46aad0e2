package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// jwtBearerGrant is the grant type of an agent's signed token request (RFC 7523).
const jwtBearerGrant = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// assertion is the JWT an agent signs to ask for a token for its human: EdDSA by
// its registered key, iss = sub = its deviceId, aud the token endpoint, a minute
// of life and a fresh jti (each is accepted once).
func assertion(key ed25519.PrivateKey, deviceID, tokenEndpoint string, now time.Time) string {
	jti := make([]byte, 16)
	_, _ = rand.Read(jti)
	header, _ := json.Marshal(map[string]string{"alg": "EdDSA", "typ": "JWT"})
	claims, _ := json.Marshal(map[string]any{
		"iss": deviceID, "sub": deviceID, "aud": tokenEndpoint,
		"iat": now.Unix(), "exp": now.Add(time.Minute).Unix(), "jti": hex.EncodeToString(jti),
	})
	signing := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(claims)
	return signing + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(key, []byte(signing)))
}

// tokenAnswer is the token endpoint's answer, or its RFC 6749 error.
type tokenAnswer struct {
	AccessToken      string `json:"access_token"`
	ExpiresIn        int64  `json:"expires_in"`
	Scope            string `json:"scope"`
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description"`
}

// runToken is `agent token`: it obtains an access token for the agent's human
// (who must have let the agent act for them towards the client) and, with
// -call, calls a protected URL with it.
func runToken(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("agent token", flag.ContinueOnError)
	server := fs.String("server", "http://localhost:8080", "palmgate server base URL")
	keyPath := fs.String("key", "agent-key.pem", "Ed25519 private key file of the registered agent")
	device := fs.String("device", "", "device ID (default: derived from the public key)")
	clientID := fs.String("client", "", "client_id of the application the human granted (required)")
	secret := fs.String("secret", "", "the client's secret (none for a public client)")
	scope := fs.String("scope", "", "scopes to ask for (default: all the grant's)")
	resource := fs.String("resource", "", "resource (audience) to ask for (default: the grant's)")
	call := fs.String("call", "", "a URL to GET with the token (with -mcp-tool: an MCP server's endpoint)")
	mcpTool := fs.String("mcp-tool", "", "call this tool (no arguments) of the MCP server at -call instead of a GET")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *clientID == "" {
		return errors.New("token: -client is required")
	}
	if *mcpTool != "" && *call == "" {
		return errors.New("token: -mcp-tool needs -call, the MCP server's endpoint")
	}
	key, err := loadOrCreateKey(*keyPath)
	if err != nil {
		return fmt.Errorf("key: %w", err)
	}
	if *device == "" {
		*device = defaultDeviceID(key)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	endpoint := strings.TrimRight(*server, "/") + "/oauth2/token"
	form := url.Values{"grant_type": {jwtBearerGrant}, "assertion": {assertion(key, *device, endpoint, time.Now())}, "client_id": {*clientID}}
	for name, v := range map[string]string{"client_secret": *secret, "scope": *scope, "resource": *resource} {
		if v != "" {
			form.Set(name, v)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var tok tokenAnswer
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(&tok); err != nil {
		return fmt.Errorf("token: HTTP %d: %w", resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK || tok.AccessToken == "" {
		return fmt.Errorf("token: HTTP %d: %s: %s", resp.StatusCode, tok.Error, tok.ErrorDescription)
	}
	fmt.Fprintf(out, "Agent %s got a token for its human at %s (scope %q, %ds):\n%s\n", *device, *clientID, tok.Scope, tok.ExpiresIn, tok.AccessToken)
	if *call == "" {
		return nil
	}
	if *mcpTool != "" {
		res, err := callMCPTool(ctx, client, *call, tok.AccessToken, *mcpTool) // mcp.go
		if err != nil {
			return fmt.Errorf("MCP %s: %w", *call, err)
		}
		fmt.Fprintf(out, "MCP %s tool %s:\n%s\n", *call, *mcpTool, res)
		return nil
	}
	creq, err := http.NewRequestWithContext(ctx, http.MethodGet, *call, nil)
	if err != nil {
		return err
	}
	creq.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	cresp, err := client.Do(creq)
	if err != nil {
		return err
	}
	defer cresp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(cresp.Body, maxBody))
	fmt.Fprintf(out, "GET %s: HTTP %d\n%s\n", *call, cresp.StatusCode, body)
	if cresp.StatusCode != http.StatusOK {
		return fmt.Errorf("call: HTTP %d", cresp.StatusCode)
	}
	return nil
}
