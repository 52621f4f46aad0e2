// Command agent is the reference example agent for palmgate's agent registry.
//
// The agent signs a registration challenge with its Ed25519 key; the server
// returns a URL that the agent's human owner opens to confirm with a palm
// scan, while the agent polls until registration completes. Afterwards anyone
// can ask the server whether a signature or device ID belongs to a verified
// agent. Standard library only, but for the MCP call of `token -mcp-tool`
// (mcp.go, the official MCP Go SDK); see README.md for the wire format.
//
//	go run ./examples/agent -server http://localhost:8080
package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"time"
)

// maxBody bounds how much of any response body is read.
const maxBody = 1 << 20 // 1 MiB

// signedRequest is the body of both POST /v1/agent/register/init and
// POST /v1/agent/verify/signature.
type signedRequest struct {
	DeviceID  string `json:"deviceId"`
	PublicKey string `json:"publicKey"` // base64 of the DER SubjectPublicKeyInfo
	Message   string `json:"message"`
	Signature string `json:"signature"` // base64 Ed25519 signature over Message
	Timestamp int64  `json:"timestamp"` // Unix milliseconds
}

// apiError is the server's error body: {"error": ..., "code": ..., "details": {...}}.
type apiError struct {
	Status  int            `json:"-"`
	Message string         `json:"error"`
	Code    string         `json:"code"`
	Details map[string]any `json:"details,omitempty"`
}

func (e *apiError) Error() string {
	return fmt.Sprintf("HTTP %d: %s (code %q, details %v)", e.Status, e.Message, e.Code, e.Details)
}

// loadOrCreateKey reads a PKCS#8 PEM Ed25519 private key from path, or
// creates one there (mode 0600) if the file does not exist yet.
func loadOrCreateKey(path string) (ed25519.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		_, key, _ := ed25519.GenerateKey(nil)      // nil: crypto/rand, which never fails
		der, _ := x509.MarshalPKCS8PrivateKey(key) // cannot fail for Ed25519
		pemBytes := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
		return key, os.WriteFile(path, pemBytes, 0o600) // owner-only: it is a secret
	}
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%s: no PEM \"PRIVATE KEY\" block", path)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	key, ok := parsed.(ed25519.PrivateKey)
	if err != nil || !ok {
		return nil, fmt.Errorf("%s: not a PKCS#8 Ed25519 private key (%v)", path, err)
	}
	return key, nil
}

// publicKeyDER returns the DER SubjectPublicKeyInfo of key's public half.
func publicKeyDER(key ed25519.PrivateKey) []byte {
	der, _ := x509.MarshalPKIXPublicKey(key.Public()) // cannot fail for Ed25519
	return der
}

// defaultDeviceID is "agent-" + the first 16 hex digits of sha256(SPKI DER).
func defaultDeviceID(key ed25519.PrivateKey) string {
	sum := sha256.Sum256(publicKeyDER(key))
	return "agent-" + hex.EncodeToString(sum[:])[:16]
}

// fingerprint is the short form of the key that the registration page shows, for
// the owner to compare: the first 8 bytes of SHA-256 over the raw 32-byte public
// key, in hex, in groups of four.
func fingerprint(key ed25519.PrivateKey) string {
	sum := sha256.Sum256(key.Public().(ed25519.PublicKey))
	h := hex.EncodeToString(sum[:8])
	return h[0:4] + "-" + h[4:8] + "-" + h[8:12] + "-" + h[12:16]
}

// sign builds a signedRequest for message, stamped with now.
func sign(key ed25519.PrivateKey, deviceID, message string, now time.Time) signedRequest {
	return signedRequest{
		DeviceID:  deviceID,
		PublicKey: base64.StdEncoding.EncodeToString(publicKeyDER(key)),
		Message:   message,
		Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(key, []byte(message))),
		Timestamp: now.UnixMilli(),
	}
}

// newChallenge builds the registration request: message "<prefix>-register-<ms>".
func newChallenge(key ed25519.PrivateKey, deviceID, prefix string, now time.Time) signedRequest {
	return sign(key, deviceID, fmt.Sprintf("%s-register-%d", prefix, now.UnixMilli()), now)
}

// agent holds what every step needs.
type agent struct {
	server   string // base URL without trailing slash
	client   *http.Client
	out      io.Writer
	key      ed25519.PrivateKey
	deviceID string
	interval time.Duration
}

// call sends a request (JSON body if body != nil) and decodes a 2xx JSON
// response into result. Any other status is returned as an *apiError.
// Response structs below need no json tags: encoding/json matches field names
// case-insensitively ("deviceId" fills DeviceID).
func (a *agent) call(ctx context.Context, method, path string, body, result any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body) // cannot fail for our request type
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.server+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := &apiError{Status: resp.StatusCode}
		if json.Unmarshal(data, e) != nil || e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
		return e
	}
	return json.Unmarshal(data, result)
}

// waitForCompletion polls the session status until it is no longer "pending".
func (a *agent) waitForCompletion(ctx context.Context, sessionID string) error {
	path := "/v1/agent/register/" + url.PathEscape(sessionID) + "/status"
	last := ""
	for {
		var st struct {
			Status, DeviceID string
			Registration     struct{ PublicKey, RegisteredAt string }
		}
		if err := a.call(ctx, http.MethodGet, path, nil, &st); err != nil {
			return fmt.Errorf("status: %w", err)
		}
		if st.Status != last {
			fmt.Fprintf(a.out, "Status: %s\n", st.Status)
			last = st.Status
		}
		switch st.Status {
		case "pending":
		case "completed":
			fmt.Fprintf(a.out, "Registered %s at %s\n", st.DeviceID, st.Registration.RegisteredAt)
			return nil
		default: // "expired", "failed" or anything unexpected
			return fmt.Errorf("registration ended with status %q", st.Status)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(a.interval):
		}
	}
}

// verifySignature shows the public check: does this signature come from a
// registered agent? It reports whether this deviceId is registered with this key.
func (a *agent) verifySignature(ctx context.Context) (registered bool, err error) {
	now := time.Now()
	msg := fmt.Sprintf("hello from %s at %s", a.deviceID, now.UTC().Format(time.RFC3339))
	req := sign(a.key, a.deviceID, msg, now)
	var res struct{ Verified, Registered bool }
	if err := a.call(ctx, http.MethodPost, "/v1/agent/verify/signature", req, &res); err != nil {
		return false, fmt.Errorf("verify signature: %w", err)
	}
	fmt.Fprintf(a.out, "Signature check %q: verified=%t registered=%t\n", msg, res.Verified, res.Registered)
	return res.Verified && res.Registered, nil
}

// lookup shows the public device lookup.
func (a *agent) lookup(ctx context.Context) error {
	var res struct {
		Registered, Verified  bool
		HumanID, RegisteredAt string
	}
	path := "/v1/agent/verify/device/" + url.PathEscape(a.deviceID)
	if err := a.call(ctx, http.MethodGet, path, nil, &res); err != nil {
		return fmt.Errorf("device lookup: %w", err)
	}
	fmt.Fprintf(a.out, "Device lookup %s: registered=%t verified=%t humanId=%q registeredAt=%q\n",
		a.deviceID, res.Registered, res.Verified, res.HumanID, res.RegisteredAt)
	return nil
}

// run is the whole program; main only adds signal handling and the exit code.
func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) > 0 && args[0] == "token" {
		return runToken(ctx, args[1:], out) // token.go
	}
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	server := fs.String("server", "http://localhost:8080", "palmgate server base URL")
	keyPath := fs.String("key", "agent-key.pem", "Ed25519 private key file (created if missing)")
	device := fs.String("device", "", "device ID (default: derived from the public key)")
	prefix := fs.String("prefix", "palmgate-example-agent", "prefix of the registration message")
	interval := fs.Duration("interval", 2*time.Second, "status polling interval")
	if err := fs.Parse(args); err != nil {
		return err
	}

	key, err := loadOrCreateKey(*keyPath)
	if err != nil {
		return fmt.Errorf("key: %w", err)
	}
	if *device == "" {
		*device = defaultDeviceID(key)
	}
	a := &agent{
		server: strings.TrimRight(*server, "/"), client: &http.Client{Timeout: 10 * time.Second},
		out: out, key: key, deviceID: *device, interval: *interval,
	}
	fmt.Fprintf(out, "Agent %s (key file %s)\n", a.deviceID, *keyPath)

	// Step 1: send the signed registration challenge.
	challenge := newChallenge(key, a.deviceID, *prefix, time.Now())
	var session struct{ SessionID, RegistrationURL, ExpiresAt string }
	err = a.call(ctx, http.MethodPost, "/v1/agent/register/init", challenge, &session)
	if apiErr := (*apiError)(nil); errors.As(err, &apiErr) && apiErr.Status == http.StatusConflict {
		// The deviceId or the key is registered: this agent only if the
		// registry says this deviceId is registered with this key.
		registered, err := a.verifySignature(ctx)
		if err != nil {
			return err
		}
		if !registered {
			return fmt.Errorf("register: another agent holds this deviceId, or this key is registered under another deviceId: %w", apiErr)
		}
		fmt.Fprintf(out, "Already registered: %s (code %q)\n", apiErr.Message, apiErr.Code)
		return a.lookup(ctx)
	}
	if err != nil {
		return fmt.Errorf("register: %w", err)
	}

	// Step 2: the human owner confirms in a browser; we only print the URL.
	fmt.Fprintf(out, "\nAsk your owner to open this URL and verify with a palm scan:\n\n    %s\n\n"+
		"The page must show this key fingerprint: %s\n(expires at %s)\n\n",
		session.RegistrationURL, fingerprint(a.key), session.ExpiresAt)

	// Step 3: wait until the owner has finished.
	if err := a.waitForCompletion(ctx, session.SessionID); err != nil {
		return err
	}

	// Step 4: demonstrate the public verification endpoints.
	if _, err := a.verifySignature(ctx); err != nil {
		return err
	}
	return a.lookup(ctx)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil && !errors.Is(err, flag.ErrHelp) {
		if ctx.Err() != nil {
			err = errors.New("interrupted")
		}
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
