package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
)

// argon2idRE is the PHC string `caddy palmgate hash-secret` prints by default.
var argon2idRE = regexp.MustCompile(`^\$argon2id\$v=19\$m=47104,t=1,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$`)

// hashSecret runs `caddy palmgate hash-secret` with args and stdin, and returns
// its stdout without the line end; it fails the test unless the command succeeds.
func hashSecret(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(testserver.Binary(t), append([]string{"palmgate", "hash-secret"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("caddy palmgate hash-secret %v: %v\nstderr: %s", args, err, stderr.String())
	}
	return strings.TrimSuffix(stdout.String(), "\n")
}

// TestHashSecretCommand runs the real binary's `caddy palmgate hash-secret`.
func TestHashSecretCommand(t *testing.T) {
	const secret = "correct horse battery staple"
	sum := sha256.Sum256([]byte(secret))
	wantSHA := "sha256:" + hex.EncodeToString(sum[:])
	for _, tc := range []struct {
		name, stdin string
		args        []string
		want        *regexp.Regexp
	}{
		{"plaintext flag, default argon2id", "", []string{"--plaintext", secret}, argon2idRE},
		{"stdin line", secret + "\n", nil, argon2idRE},
		{"stdin without a line end", secret, []string{"--algorithm", "argon2id"}, argon2idRE},
		{"sha256 from stdin with CRLF", secret + "\r\n", []string{"--algorithm", "sha256"}, regexp.MustCompile("^" + regexp.QuoteMeta(wantSHA) + "$")},
		{"sha256 short flags", "", []string{"-a", "sha256", "-p", secret}, regexp.MustCompile("^" + regexp.QuoteMeta(wantSHA) + "$")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := hashSecret(t, tc.stdin, tc.args...); !tc.want.MatchString(got) {
				t.Errorf("output %q, want %s", got, tc.want)
			}
		})
	}
	a, b := hashSecret(t, "", "-p", secret), hashSecret(t, "", "-p", secret)
	if a == b {
		t.Errorf("two argon2id hashes of one secret are equal (%s): no random salt", a)
	}
	for _, args := range [][]string{{"--algorithm", "md5", "-p", "x"}, {"-p", ""}, {"unexpected-argument"}} {
		cmd := exec.Command(testserver.Binary(t), append([]string{"palmgate", "hash-secret"}, args...)...)
		cmd.Stdin = strings.NewReader("")
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("hash-secret %q succeeded: %s", args, out)
		}
	}
}

// TestSecretHashConfig: clients configured with secret_hash (both forms, made by
// the real hash-secret command) or with an {env.…} secret log in and exchange
// codes, and Caddy's config, as the admin API serves it, holds none of their
// secrets in clear (issue 9, finding 9). The one client secret in clear is
// warned about at start; a pairwise_secret placeholder is replaced (issue 18,
// finding 7).
func TestSecretHashConfig(t *testing.T) {
	slow := newOIDCClient("slow", "")
	slow.secretHash = hashSecret(t, slow.secret+"\n")
	fast := newOIDCClient("fast", "")
	fast.secretHash = hashSecret(t, "", "--algorithm", "sha256", "--plaintext", fast.secret)
	clear := newOIDCClient("clear", "")
	fromEnv := newOIDCClient("env", "")
	envSecret := fromEnv.secret
	fromEnv.secret = "{env.PALMGATE_TEST_CLIENT_SECRET}"
	// A placeholder shorter than the 32 characters pairwise_secret needs: the
	// server starts only if it is replaced before the check.
	pairwise := "pairwise-" + randHex(16)
	lines := []string{"rate_limit off", "pairwise_secret {env.PALMGATE_TEST_PAIRWISE}"}
	for _, c := range []oidcClient{slow, fast, clear, fromEnv} {
		lines = append(lines, c.config())
	}
	e := start(t, testserver.Options{Global: strings.Join(lines, "\n"),
		Env: []string{"PALMGATE_TEST_CLIENT_SECRET=" + envSecret, "PALMGATE_TEST_PAIRWISE=" + pairwise}})
	fromEnv.secret = envSecret

	// One warning at start, for the one secret in clear, naming its client and
	// the safe forms, never the secret (issue 18, finding 7).
	var warned []string
	for _, line := range strings.Split(e.Log(), "\n") {
		if strings.Contains(line, `"option":`) {
			warned = append(warned, line)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], `"level":"warn"`) || !strings.Contains(warned[0], `"option":"client.secret"`) ||
		!strings.Contains(warned[0], `"client_id":"clear"`) || !strings.Contains(warned[0], "secret_hash") || !strings.Contains(warned[0], "{env.") {
		t.Errorf("warnings at start %q, want one naming client clear's secret and secret_hash, {env.*}", warned)
	}
	for what, secret := range map[string]string{"client secret": clear.secret, "pairwise secret": pairwise} {
		if strings.Contains(e.Log(), secret) {
			t.Errorf("the server log holds the %s", what)
		}
	}

	cfg := adminGet(t, e, "/config/apps/palmgate/")
	if strings.Contains(cfg, pairwise) || !strings.Contains(cfg, `"pairwise_secret":"{env.PALMGATE_TEST_PAIRWISE}"`) {
		t.Errorf("/config/apps/palmgate/ holds the pairwise secret, or not its placeholder:\n%s", cfg)
	}
	for _, c := range []oidcClient{slow, fast, fromEnv} {
		if strings.Contains(cfg, c.secret) {
			t.Errorf("/config/apps/palmgate/ holds client %s's secret in clear:\n%s", c.id, cfg)
		}
		if c.secretHash != "" && !strings.Contains(cfg, `"secret_hash":"`+c.secretHash+`"`) {
			t.Errorf("/config/apps/palmgate/ lacks client %s's secret_hash:\n%s", c.id, cfg)
		}
	}
	if !strings.Contains(cfg, clear.secret) {
		t.Errorf("the clear secret of client clear is not in the config: the check above proves nothing:\n%s", cfg)
	}

	for _, c := range []oidcClient{slow, fast, fromEnv} {
		t.Run(c.id, func(t *testing.T) {
			code, verifier := e.codeFor(t, c, e.subject("ann"), true)
			wrong := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {c.redirects[0]},
				"client_id": {c.id}, "client_secret": {c.secret + "x"}, "code_verifier": {verifier}}
			expectOAuthError(t, e.postToken(t, wrong), http.StatusUnauthorized, "invalid_client")
			if c.secretHash != "" {
				expectOAuthError(t, e.postToken(t, withParam(wrong, "client_secret", c.secretHash)), http.StatusUnauthorized, "invalid_client")
			}
			m := e.exchange(t, c, code, verifier)
			e.expectUserinfo(t, str(m["access_token"]), str(jwtPart(t, str(m["access_token"]), 1)["sub"]))
			// client_secret_basic, many times: the argon2id verification is remembered.
			refresh := str(m["refresh_token"])
			start := time.Now()
			for range 20 {
				form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}}
				m := e.postToken(t, form, "Authorization", basicAuth(c.id, c.secret)).ExpectStatus(t, http.StatusOK).Object(t)
				refresh = str(m["refresh_token"])
			}
			t.Logf("20 refreshes with client_secret_basic in %v", time.Since(start))
		})
	}
}

// adminGet reads path from the server's admin API.
func adminGet(t *testing.T, e *env, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + e.AdminAddr + path)
	if err != nil {
		t.Fatalf("GET admin %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET admin %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}
