package integration

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
)

// runTool runs the caddy binary under test with args, with no server, and
// returns its stdout and stderr.
func runTool(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testserver.Binary(t), args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

var attestorLineRE = regexp.MustCompile(`(?m)^\s*(palm_attestor \S+ [A-Za-z0-9+/=]+)$`)

// keygen runs `caddy palmgate keygen --out <dir>/<name>.pem --name <name>` and
// returns the key file and the palm_attestor line it prints.
func keygen(t *testing.T, dir, name string, p256 bool) (keyFile, line string) {
	t.Helper()
	keyFile = filepath.Join(dir, name+".pem")
	args := []string{"palmgate", "keygen", "--out", keyFile, "--name", name}
	if p256 {
		args = append(args, "--p256")
	}
	out, stderr, err := runTool(t, args...)
	if err != nil {
		t.Fatalf("caddy %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	m := attestorLineRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("caddy %s printed no palm_attestor line:\n%s", strings.Join(args, " "), out)
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file %s: %v, mode %v, want 0600", keyFile, err, fi.Mode())
	}
	return keyFile, m[1]
}

// scanCLI runs `caddy palmgate scan <args>` and returns its output.
func scanCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return runTool(t, append([]string{"palmgate", "scan"}, args...)...)
}

// expectScanRefused expects scan to fail with one plain line on stderr holding each
// of want.
func expectScanRefused(t *testing.T, what string, stderr string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: scan succeeded, want a refusal", what)
		return
	}
	line := strings.TrimSuffix(stderr, "\n")
	t.Logf("%s: %s", what, line)
	if strings.Contains(line, "\n") || strings.HasPrefix(line, "{") || strings.Contains(line, `\"`) {
		t.Errorf("%s: stderr is not one plain line:\n%s", what, stderr)
	}
	for _, w := range want {
		if !strings.Contains(line, w) {
			t.Errorf("%s: stderr %q does not say %q", what, line, w)
		}
	}
}

// TestScanCLIProduction: on a production-mode palmgate (no dev) whose attestors'
// keys `caddy palmgate keygen` made, `caddy palmgate scan` completes a login
// (authorize, the page's scan URL, scan, code exchange) with an Ed25519 key and
// an agent registration with a P-256 one; --deny declines; a bad key file, a
// wrong attestor name and a key of another attestor are refused with one plain
// line and leave the challenge pending. `caddy palmgate version` prints the
// version that the start log and the admin stats show.
func TestScanCLIProduction(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	edKey, edLine := keygen(t, dir, "ed-engine", false)
	ecKey, ecLine := keygen(t, dir, "ec-engine", true)
	if _, stderr, err := runTool(t, "palmgate", "keygen", "--out", edKey); err == nil || !strings.Contains(stderr, "--out") {
		t.Errorf("keygen over an existing key file: %v %q, want a refusal naming --out", err, stderr)
	}
	c := newOIDCClient("scan-app", "")
	e := start(t, testserver.Options{NoDev: true, Global: strings.Join([]string{edLine, ecLine, "rate_limit off", c.config()}, "\n")})

	// The version: printed, logged at start, in the admin stats.
	version, stderr, err := runTool(t, "palmgate", "version")
	version = strings.TrimSpace(version)
	if err != nil || version == "" || strings.Contains(version, "\n") {
		t.Fatalf("caddy palmgate version: %v %q %q, want one line", err, version, stderr)
	}
	startLine := regexp.MustCompile(`"msg":"palmgate started".*"version":"([^"]*)"`).FindStringSubmatch(e.Log())
	if startLine == nil || startLine[1] != version {
		t.Errorf("start log line %v, want one with version %q", startLine, version)
	}
	stats := testserver.Do(t, "GET", "http://"+e.AdminAddr+"/palmgate/stats", nil).ExpectStatus(t, http.StatusOK).Object(t)
	if str(stats["version"]) != version {
		t.Errorf("admin stats version %v, want %q", stats["version"], version)
	}

	// A login, the scan URL as the login page has it.
	alice := e.subject("alice")
	id := e.authorize(t, e.authURL(c))
	page := e.loginPageJSON(t, id)
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, err = scanCLI(t, page.ScanURL, "--key", garbage, "--attestor", "ed-engine", "--subject", alice)
	expectScanRefused(t, "a bad key file", stderr, err, "--key", "no PEM block")
	_, stderr, err = scanCLI(t, page.ScanURL, "--key", filepath.Join(dir, "missing.pem"), "--attestor", "ed-engine", "--subject", alice)
	expectScanRefused(t, "a missing key file", stderr, err, "--key", "no such file")
	_, stderr, err = scanCLI(t, page.ScanURL, "--key", edKey, "--attestor", "no-such-engine", "--subject", alice)
	expectScanRefused(t, "a wrong attestor name", stderr, err, "401", "--attestor", "palm_attestor no-such-engine")
	_, stderr, err = scanCLI(t, page.ScanURL, "--key", ecKey, "--attestor", "ed-engine", "--subject", alice)
	expectScanRefused(t, "another attestor's key", stderr, err, "401", "--key")
	_, stderr, err = scanCLI(t, page.ScanURL, "--key", edKey, "--attestor", "ed-engine")
	expectScanRefused(t, "no subject", stderr, err, "--subject")
	_, stderr, err = scanCLI(t, strings.Replace(page.ScanURL, "nonce=", "nonce=x", 1), "--key", edKey, "--attestor", "ed-engine", "--subject", alice)
	expectScanRefused(t, "a wrong nonce", stderr, err, "404")
	_, stderr, err = scanCLI(t, e.URL+"/oauth2/verify?auth_request_id="+id, "--key", edKey, "--attestor", "ed-engine", "--subject", alice)
	expectScanRefused(t, "a page URL instead of the scan URL", stderr, err, "<scan-url>", "/v1/palm/challenges/")
	if st := e.loginPageJSON(t, id).Status; st != "pending" {
		t.Fatalf("login after the refused scans: %s, want pending", st)
	}
	out, stderr, err := scanCLI(t, page.ScanURL, "--key", edKey, "--attestor", "ed-engine", "--subject", alice)
	if err != nil {
		t.Fatalf("scan of the login: %v\n%s%s", err, out, stderr)
	}
	for _, want := range []string{"Log in to " + c.name, "scope openid", "approved", "verified"} {
		if !strings.Contains(out, want) {
			t.Errorf("scan output does not say %q:\n%s", want, out)
		}
	}
	t.Logf("scan of the login:\n%s", out)
	if strings.Contains(out+stderr, alice) {
		t.Errorf("scan prints the palm subject:\n%s", out)
	}
	q := e.finish(t, id, c.redirects[0])
	tok := e.exchange(t, c, q.Get("code"), "")
	sub := str(jwtPart(t, str(tok["id_token"]), 1)["sub"])
	if !subRE.MatchString(sub) {
		t.Errorf("ID token sub %q is not a pairwise subject", sub)
	}
	e.expectUserinfo(t, str(tok["access_token"]), sub)

	// A declined login ends in access_denied.
	id2 := e.authorize(t, e.authURL(c))
	out, stderr, err = scanCLI(t, e.loginPageJSON(t, id2).ScanURL, "--deny")
	if err != nil || !strings.Contains(out, "denied") {
		t.Fatalf("scan --deny: %v\n%s%s", err, out, stderr)
	}
	if q := e.finish(t, id2, c.redirects[0]); q.Get("error") != "access_denied" {
		t.Errorf("callback after --deny: %v, want error=access_denied", q)
	}

	// An agent registration, the scan URL as the owner's page offers it to a
	// phone, signed with the P-256 key.
	a := newAgent(t, "scan-agent-"+randHex(4))
	s := e.initSession(t, a.registration(time.Now()))
	ci := e.verifyInfo(t, s)
	out, stderr, err = scanCLI(t, ci.ScanURL, "--key", ecKey, "--attestor", "ec-engine", "--subject", e.subject("bob"))
	if err != nil {
		t.Fatalf("scan of the registration: %v\n%s%s", err, out, stderr)
	}
	for _, want := range []string{"Register agent " + a.deviceID, ci.KeyFingerprint, "approved"} {
		if !strings.Contains(out, want) {
			t.Errorf("scan output does not say %q:\n%s", want, out)
		}
	}
	if st := e.status(t, s.ID); str(st["status"]) != "completed" {
		t.Errorf("registration status after the scan: %v, want completed", st)
	}
	if l := e.lookupDevice(t, a.deviceID); !l.Registered || !l.Verified {
		t.Errorf("device lookup after the scan: %+v", l)
	}
	// A second scan of an ended challenge says so.
	_, stderr, err = scanCLI(t, ci.ScanURL, "--key", ecKey, "--attestor", "ec-engine", "--subject", "bob")
	expectScanRefused(t, "a scan of a verified challenge", stderr, err, "not pending")

	// No palm subject reaches the log.
	for _, s := range e.secrets {
		if strings.Contains(e.Log(), s) {
			t.Errorf("the server log holds the palm subject %q", s)
		}
	}
}
