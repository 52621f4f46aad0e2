package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/palmgate/palmgate/core/palm"
)

// The integrator's tools: `caddy palmgate version`, `keygen` (an attestor key
// pair for palm_attestor) and `scan` (the palm app's part of a login or an agent
// registration, signed with such a key), so that a production-mode palmgate (no
// dev) can be tried and tested without the mobile app.

// addToolCommands adds version, keygen and scan to `caddy palmgate`.
func addToolCommands(parent *cobra.Command) {
	parent.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Prints palmgate's version (of the palmgate module in this binary)",
		Args:  cobra.NoArgs,
		Run:   func(*cobra.Command, []string) { fmt.Println(Version()) },
	})

	keygen := &cobra.Command{
		Use:   "keygen [--p256] [--out <file>] [--name <attestor name>]",
		Short: "Makes a palm attestor key pair: the private key (PEM) and the palm_attestor line",
		Long: `
Generates a palm attestor key pair, for a test palm engine such as
'caddy palmgate scan': an Ed25519 key (EdDSA assertions), or with --p256 an
ECDSA P-256 key (ES256, what phone secure enclaves hold).

The private key is written as PKCS#8 PEM to --out (created with mode 0600; an
existing file is never overwritten) or, without --out, to stdout. Then the public
key is printed in the form palm_attestor takes (base64 DER SubjectPublicKeyInfo),
with the line to paste into the palmgate global option.
`,
		Args: cobra.NoArgs,
	}
	keygen.Flags().Bool("p256", false, "An ECDSA P-256 key (ES256) instead of Ed25519 (EdDSA)")
	keygen.Flags().String("out", "", "Write the private key to this new file (mode 0600) instead of stdout")
	keygen.Flags().String("name", "engine", "The attestor's name in the palm_attestor line (the iss of its assertions)")
	keygen.RunE = plainErrors(runKeygen)
	parent.AddCommand(keygen)

	scan := &cobra.Command{
		Use:   "scan <scan-url> --key <private key file> --attestor <name> --subject <id> [--deny]",
		Short: "Plays the palm app: answers a login's or registration's palm challenge",
		Long: `
Does what the palm app and its palm engine do when a person scans the QR code of
a login or agent registration page: reads the scan URL (the QR code's URL, or the
page's "Open in your palm app" link; {issuer}/v1/palm/challenges/<id>?nonce=...),
prints what the person is asked to approve, then signs the palm assertion with
the attestor's private key (as 'caddy palmgate keygen' makes it; the server must
have its public key in a palm_attestor line with the same name) and posts it.

--subject is the palm subject: the stable, opaque identifier the palm engine gives
a person (the same --subject is the same person). --deny declines instead (the
person said no); it needs no key.
`,
		Args: cobra.ArbitraryArgs, // checked by runScan, to name what is missing
	}
	scan.Flags().String("key", "", "The attestor's private key file (PEM, PKCS#8), as 'caddy palmgate keygen --out' writes")
	scan.Flags().String("attestor", "", "The attestor's name, as its palm_attestor line has it")
	scan.Flags().String("subject", "", "The palm subject: who the palm engine recognised")
	scan.Flags().Bool("deny", false, "Decline instead of approving")
	scan.RunE = plainErrors(runScan)
	parent.AddCommand(scan)
}

func runKeygen(cmd *cobra.Command, _ []string) error {
	p256, _ := cmd.Flags().GetBool("p256")
	out, _ := cmd.Flags().GetString("out")
	name, _ := cmd.Flags().GetString("name")
	if name == "" || strings.ContainsAny(name, " \t\r\n\"{}") {
		return fmt.Errorf("--name %q: an attestor name is one word (no space, quote or brace)", name)
	}
	privPEM, pub, err := palm.NewEngineKey(p256)
	if err != nil {
		return err
	}
	stdout := cmd.OutOrStdout()
	if out == "" {
		_, _ = stdout.Write(privPEM)
	} else {
		f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("--out %s: the file exists; choose a new path (a key is never overwritten)", out)
		}
		if err != nil {
			return fmt.Errorf("--out: %v", err)
		}
		if _, err := f.Write(privPEM); err != nil {
			f.Close()
			return fmt.Errorf("--out %s: %v", out, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("--out %s: %v", out, err)
		}
		fmt.Fprintf(stdout, "private key: %s (mode 0600; keep it secret)\n", out)
	}
	alg := "Ed25519, EdDSA"
	if p256 {
		alg = "P-256, ES256"
	}
	fmt.Fprintf(stdout, "public key (%s): %s\n", alg, pub)
	fmt.Fprintf(stdout, "add to the palmgate global option:\n\tpalm_attestor %s %s\n", name, pub)
	return nil
}

// scanChallenge is what GET on a scan URL answers (palm.Challenge as the app
// reads it).
type scanChallenge struct {
	ChallengeID string       `json:"challengeId"`
	Nonce       string       `json:"nonce"`
	Purpose     string       `json:"purpose"`
	Status      string       `json:"status"`
	ExpiresAt   string       `json:"expiresAt"`
	Request     palm.Request `json:"request"`
}

// scanClient is the HTTP client of `scan`: its requests are small and the server
// answers them at once.
var scanClient = &http.Client{Timeout: 30 * time.Second}

func runScan(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return errors.New("needs exactly one <scan-url>: the URL of the page's QR code or its \"Open in your palm app\" link ({issuer}/v1/palm/challenges/<id>?nonce=...)")
	}
	issuer, challengeID, nonce, err := parseScanURL(args[0])
	if err != nil {
		return err
	}
	flags := cmd.Flags()
	keyFile, _ := flags.GetString("key")
	attestor, _ := flags.GetString("attestor")
	subject, _ := flags.GetString("subject")
	deny, _ := flags.GetBool("deny")
	var engine palm.Engine
	if !deny {
		if keyFile == "" {
			return errors.New("--key: required: the attestor's private key file, as 'caddy palmgate keygen --out <file>' writes it")
		}
		if attestor == "" {
			return errors.New("--attestor: required: the attestor's name, as in the server's `palm_attestor <name> <public key>` line")
		}
		if subject == "" {
			return errors.New("--subject: required: the palm subject, who the palm engine recognised (any stable id, such as alice)")
		}
		data, err := os.ReadFile(keyFile)
		if err != nil {
			return fmt.Errorf("--key: %v", err)
		}
		key, err := palm.ParseEngineKey(data)
		if err != nil {
			return fmt.Errorf("--key %s: %v", keyFile, err)
		}
		engine = palm.Engine{Name: attestor, Audience: issuer, Key: key}
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	out := cmd.OutOrStdout()

	var c scanChallenge
	status, body, err := scanRequest(ctx, http.MethodGet, args[0], nil)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("the scan URL answered %s%s", answerText(status, body), scanURLHint(status))
	}
	if err := json.Unmarshal(body, &c); err != nil || c.ChallengeID != challengeID {
		return fmt.Errorf("the scan URL's answer is not a palm challenge: %.200s", body)
	}
	printAsked(out, c)
	if c.Status != string(palm.StatusPending) {
		return fmt.Errorf("the challenge is %s, not pending: nothing to answer; start a new login or registration", c.Status)
	}

	base := issuer + "/v1/palm/challenges/" + url.PathEscape(challengeID)
	var path string
	var payload any
	if deny {
		path, payload = base+"/deny", map[string]string{"nonce": nonce}
	} else {
		assertion, err := engine.Sign(challengeID, nonce, subject)
		if err != nil {
			return fmt.Errorf("--key %s: %v", keyFile, err)
		}
		path, payload = base+"/assertion", map[string]string{"assertion": assertion}
	}
	status, body, err = scanRequest(ctx, http.MethodPost, path, payload)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		if deny {
			return fmt.Errorf("the denial was refused: %s", answerText(status, body))
		}
		return fmt.Errorf("the assertion was refused: %s%s", answerText(status, body), assertionHint(status, attestor, keyFile))
	}
	var answer struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(body, &answer)
	switch {
	case deny:
		fmt.Fprintf(out, "denied: the challenge is now %s\n", answer.Status)
	case c.Purpose == string(palm.PurposeLogin):
		fmt.Fprintf(out, "approved: the challenge is now %s; the login page continues to the application\n", answer.Status)
	default:
		fmt.Fprintf(out, "approved: the challenge is now %s; the agent is registered to this palm subject\n", answer.Status)
	}
	return nil
}

// parseScanURL reads a scan URL: {issuer}/v1/palm/challenges/{id}?nonce={nonce}.
// The issuer (scheme and host) is the assertion's audience.
func parseScanURL(raw string) (issuer, challengeID, nonce string, err error) {
	bad := func(why string) error {
		return fmt.Errorf("<scan-url> %q: %s; want {issuer}/v1/palm/challenges/<id>?nonce=<nonce>, the URL of the page's QR code or its \"Open in your palm app\" link (quote it in the shell)", raw, why)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", "", bad("not a URL")
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", "", "", bad("not an absolute http(s) URL")
	}
	challengeID, ok := strings.CutPrefix(u.Path, "/v1/palm/challenges/")
	if !ok || challengeID == "" || strings.Contains(challengeID, "/") {
		return "", "", "", bad("not a palm challenge's path")
	}
	if nonce = u.Query().Get("nonce"); nonce == "" {
		return "", "", "", bad("no nonce")
	}
	return u.Scheme + "://" + u.Host, challengeID, nonce, nil
}

// printAsked prints what the person is asked to approve, as the palm app shows it.
func printAsked(w io.Writer, c scanChallenge) {
	r := c.Request
	switch palm.Purpose(c.Purpose) {
	case palm.PurposeLogin:
		name := r.ClientName
		if r.ClientNotice != "" {
			name += " (" + r.ClientNotice + ")"
		}
		fmt.Fprintf(w, "Log in to %s\n", name)
		for i, s := range r.Scopes {
			if i < len(r.ScopeDescriptions) && r.ScopeDescriptions[i] != "" {
				fmt.Fprintf(w, "  scope %s: %s\n", s, r.ScopeDescriptions[i])
			} else {
				fmt.Fprintf(w, "  scope %s\n", s)
			}
		}
		if r.BrowserIP != "" || r.BrowserSummary != "" {
			fmt.Fprintf(w, "  requested by %s from %s\n", orUnknown(r.BrowserSummary), orUnknown(r.BrowserIP))
		}
	case palm.PurposeAgentRegistration:
		fmt.Fprintf(w, "Register agent %s\n  key fingerprint %s (the agent prints the same)\n", r.DeviceID, r.KeyFingerprint)
	default:
		fmt.Fprintf(w, "Palm challenge for %q\n", c.Purpose)
	}
	if at := time.Time(r.RequestedAt); !at.IsZero() {
		fmt.Fprintf(w, "  requested at %s\n", at.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(w, "  challenge %s: %s, expires at %s\n", c.ChallengeID, c.Status, cliTime(c.ExpiresAt))
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// scanRequest sends one request of `scan` and returns the answer's status and
// body (at most 1 MiB).
func scanRequest(ctx context.Context, method, target string, payload any) (int, []byte, error) {
	var body io.Reader
	if payload != nil {
		b, _ := json.Marshal(payload)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %v", method, target, err)
	}
	req.Header.Set("Accept", "application/json")
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := scanClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: no answer (is palmgate running there?): %v", req.URL.Redacted(), errors.Unwrap(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("%s: reading the answer: %v", method, err)
	}
	return resp.StatusCode, b, nil
}

// answerText is a refusal in words: the status and the /v1 error body's code and
// message.
func answerText(status int, body []byte) string {
	var e struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	if json.Unmarshal(body, &e) == nil && (e.Error != "" || e.Code != "") {
		return fmt.Sprintf("%d %s (%s)", status, e.Code, e.Error)
	}
	return fmt.Sprintf("%d %s", status, http.StatusText(status))
}

func scanURLHint(status int) string {
	switch status {
	case http.StatusNotFound:
		return ": the challenge or its nonce is unknown; copy the whole URL from the page"
	case http.StatusGone:
		return ": this scan URL lapsed or was replaced (a page renews it every minute); take the current one from the open page"
	}
	return ""
}

func assertionHint(status int, attestor, keyFile string) string {
	if status == http.StatusUnauthorized {
		return fmt.Sprintf("; check --attestor %q and --key %s: the server must have `palm_attestor %s <public key of that key>` (run 'caddy palmgate keygen' for a pair), and the clocks must agree", attestor, keyFile, attestor)
	}
	return ""
}
