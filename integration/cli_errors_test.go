package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
)

// runCLI runs the binary under test with args and the environment env (plus
// PATH), and returns its stdout, its stderr and its exit status.
func runCLI(t *testing.T, env []string, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testserver.Binary(t), args...)
	home := t.TempDir()
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home,
		"XDG_DATA_HOME=" + filepath.Join(home, "data"), "XDG_CONFIG_HOME=" + filepath.Join(home, "config")}, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		status = exit.ExitCode()
	default:
		t.Fatalf("running %v: %v", args, err)
	}
	return out.String(), errOut.String(), status
}

// TestCLIErrors: every `caddy palmgate` command reports an error as one plain
// line on stderr, naming the flag and the fix, with exit status 1: no log entry
// with escaped JSON inside, no field names instead of flags, no "unexpected end
// of JSON input" from a site's address, no bare "connection refused" (issue 22,
// item 6).
func TestCLIErrors(t *testing.T) {
	t.Parallel()
	e := start(t, testserver.Options{})
	admin := []string{"--address", e.AdminAddr}
	site := strings.TrimPrefix(e.URL, "http://")
	dead := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t)) // nothing listens there
	fix := `give the admin API's address with --address (the "admin" global option; by default localhost:2019)`
	notAdmin := func(cmd string) string {
		return fmt.Sprintf("caddy palmgate %s: --address %s is not Caddy's admin API: it answered 200 with no content type, "+
			"not the admin API's JSON (a site's address?); %s", cmd, site, fix)
	}
	nothing := func(cmd, source string) string {
		return fmt.Sprintf("caddy palmgate %s: nothing answers at %s (connection refused): is Caddy running, with its admin API on (not admin off)? Start it, or %s or --config <Caddyfile>",
			cmd, source, fix)
	}
	backupTo := filepath.Join(t.TempDir(), "palmgate.backup")

	type tc struct {
		name string
		env  []string
		args []string
		want string
	}
	var cases []tc
	// Every command that calls the admin API, given a site's address, nothing, or
	// the default address with nothing there.
	for _, c := range [][]string{
		{"client", "list"}, {"client", "show", "demo"}, {"client", "add", "--name", "x", "--redirect-uri", "https://x.example/cb"},
		{"client", "update", "demo", "--name", "x"}, {"client", "rotate-secret", "demo"}, {"client", "remove", "demo"},
		{"portal", "end-sessions", "8f1f5d3e-0000-4000-8000-000000000000"}, {"keys", "list"}, {"keys", "rotate"},
		{"agent", "remove", "agent-1"}, {"backup", "--to", backupTo},
	} {
		name := c[0]
		if c[0] != "backup" {
			name += " " + c[1]
		}
		args := append([]string{"palmgate"}, c...)
		cases = append(cases,
			tc{name + " at a site", nil, append(args, "--address", site), notAdmin(name)},
			tc{name + " at nothing", nil, append(args, "--address", dead), nothing(name, "--address "+dead)},
			tc{name + " at the default, nothing", []string{"CADDY_ADMIN=" + dead}, args, nothing(name, "the default admin address "+dead)},
		)
	}
	cases = append(cases, []tc{
		{"client add, a bad redirect URI", nil, append([]string{"palmgate", "client", "add", "--name", "x", "--redirect-uri", "ftp://x.example/cb"}, admin...),
			`caddy palmgate client add: --redirect-uri "ftp://x.example/cb": the scheme ftp is not an app's own: use https, http on a loopback host, or a private-use scheme of the app (RFC 8252 7.1)`},
		{"client add without --name", nil, append([]string{"palmgate", "client", "add", "--redirect-uri", "https://x.example/cb"}, admin...),
			`caddy palmgate client add: --name is required: the application's name, which the login page shows (such as --name "My App")`},
		{"client add without --redirect-uri", nil, append([]string{"palmgate", "client", "add", "--name", "x"}, admin...),
			"caddy palmgate client add: --redirect-uri is required: where the login returns to the application " +
				"(such as --redirect-uri https://app.example.com/callback; repeat it for several)"},
		{"client add, a long name", nil, append([]string{"palmgate", "client", "add", "--name", strings.Repeat("n", 101), "--redirect-uri", "https://x.example/cb"}, admin...),
			"caddy palmgate client add: --name: 1 to 100 characters on one line"},
		{"client rotate-secret, a bad --grace", nil, append([]string{"palmgate", "client", "rotate-secret", "demo", "--grace", "soon"}, admin...),
			`caddy palmgate client rotate-secret: --grace "soon": not a duration; give one such as 24h, 90m or 0s (0s: the current secret stops at once)`},
		{"client show unknown", nil, append([]string{"palmgate", "client", "show", "pg_AAAAAAAAAAAAAAAAAAAAAA"}, admin...),
			`caddy palmgate client show: no client "pg_AAAAAAAAAAAAAAAAAAAAAA"`},
		{"client show without an id", nil, append([]string{"palmgate", "client", "show"}, admin...),
			"caddy palmgate client show: accepts 1 arg(s), received 0; usage: caddy palmgate client show <client_id>"},
		{"client list, an unknown flag", nil, append([]string{"palmgate", "client", "list", "--bogus"}, admin...),
			"caddy palmgate client list: unknown flag: --bogus; usage: caddy palmgate client list"},
		{"client list, not an address", nil, []string{"palmgate", "client", "list", "--address", "127.0.0.1:1-3"},
			"caddy palmgate client list: --address 127.0.0.1:1-3 is not an address (host:port, or unix/<path>); " + fix + " or --config <Caddyfile>"},
		{"client update without a change", nil, append([]string{"palmgate", "client", "update", "demo"}, admin...),
			"caddy palmgate client update: nothing to change: give at least one of --name, --redirect-uri, --sector, --post-logout-redirect-uri, --backchannel-logout-uri, --id-token-alg, --access-token-audience or --allowed-origin"},
		{"portal end-sessions, a bad owner", nil, append([]string{"palmgate", "portal", "end-sessions", "not-a-developer"}, admin...),
			"caddy palmgate portal end-sessions: <owner> must be a developer's id (a client's owner, a lowercase uuid)"},
		{"keys rotate, a bad --alg", nil, append([]string{"palmgate", "keys", "rotate", "--alg", "HS256"}, admin...),
			`caddy palmgate keys rotate: --alg: "HS256" is not a signing algorithm (RS256, ES256, EdDSA)`},
		{"agent remove unknown", nil, append([]string{"palmgate", "agent", "remove", "never-registered"}, admin...),
			"caddy palmgate agent remove: no agent with this deviceId is registered"},
		{"backup without --to", nil, append([]string{"palmgate", "backup"}, admin...),
			"caddy palmgate backup: --to is required; usage: caddy palmgate backup --to <file> [--key-file <file>] [--address <admin>]"},
		{"restore without flags", nil, []string{"palmgate", "restore"},
			"caddy palmgate restore: both --from and --storage are required; usage: caddy palmgate restore --from <file> [--key-file <file>] --storage badger <dir> | --storage postgres <dsn>"},
		{"migrate without flags", nil, []string{"palmgate", "migrate"},
			"caddy palmgate migrate: both --from and --to are required; usage: caddy palmgate migrate --from badger <dir> --to postgres <dsn>"},
		{"hash-secret, a bad --algorithm", nil, []string{"palmgate", "hash-secret", "--plaintext", "x", "--algorithm", "md5"},
			`caddy palmgate hash-secret: --algorithm: unknown algorithm "md5" (argon2id or sha256)`},
		{"version with an argument", nil, []string{"palmgate", "version", "now"},
			`caddy palmgate version: unknown command "now" for "caddy palmgate version"; usage: caddy palmgate version`},
		{"keygen, a bad --name", nil, []string{"palmgate", "keygen", "--name", "a b"},
			`caddy palmgate keygen: --name "a b": an attestor name is one word (no space, quote or brace)`},
		{"scan without a URL", nil, []string{"palmgate", "scan"},
			`caddy palmgate scan: needs exactly one <scan-url>: the URL of the page's QR code or its "Open in your palm app" link ({issuer}/v1/palm/challenges/<id>?nonce=...)`},
	}...)

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, status := runCLI(t, c.env, c.args...)
			if status != 1 || stdout != "" || stderr != c.want+"\n" {
				t.Errorf("caddy %s:\nexit status %d, stdout %q\nstderr %q\nwant exit status 1, nothing on stdout, and on stderr\n       %q",
					strings.Join(c.args, " "), status, stdout, stderr, c.want+"\n")
			}
		})
	}
	if _, err := os.Stat(backupTo); err == nil {
		t.Errorf("a failed backup left %s", backupTo)
	}
}

// TestCLIAdminOff: a command given a config that turns the admin API off says
// so, and how to turn it on, rather than "is Caddy running?" (fourth review).
func TestCLIAdminOff(t *testing.T) {
	t.Parallel()
	config := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(config, []byte("{\n\tadmin off\n}\n:8080 {\n\trespond ok\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"client", "list"}, {"keys", "list"}, {"backup", "--to", filepath.Join(t.TempDir(), "b")}} {
		_, stderr, status := runCLI(t, nil, append(append([]string{"palmgate"}, args...), "--config", config, "--adapter", "caddyfile")...)
		want := "--config " + config + " turns Caddy's admin API off (admin off): the palmgate commands work through it; " +
			"give the admin global option a local address instead (such as admin localhost:2019) and restart Caddy"
		if status != 1 || !strings.Contains(stderr, want) || strings.Contains(stderr, "is Caddy running") {
			t.Errorf("caddy palmgate %v --config <admin off>: exit status %d, stderr %q\nwant 1 and %q", args, status, stderr, want)
		}
	}
}

// rfc3339Seconds is a time as the commands print it: RFC 3339 in UTC, to the
// second.
var rfc3339Seconds = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$`)

// TestCLITimes: the commands print times as RFC 3339 to the second, not with
// the nanoseconds the admin API keeps (issue 22, item 6).
func TestCLITimes(t *testing.T) {
	t.Parallel()
	e := start(t, testserver.Options{})
	var added cliClient
	e.cliJSON(t, &added, "add", "--name", "Times", "--redirect-uri", "https://times.example/cb")
	e.cli(t, "rotate-secret", added.ID, "--grace", "1h")
	out := e.cli(t, "show", added.ID)
	m := regexp.MustCompile(`previous secret works until +(\S+)`).FindStringSubmatch(out)
	if m == nil || !rfc3339Seconds.MatchString(m[1]) {
		t.Errorf("client show after a rotation: want \"previous secret works until\" and an RFC 3339 time to the second:\n%s", out)
	}

	ag := newAgent(t, "times-agent")
	e.register(t, ag, e.subject("times-owner"))
	out, err := e.RunCommand(t, "palmgate", "agent", "remove", ag.deviceID, "--address", e.AdminAddr)
	m = regexp.MustCompile(`registered (\S+)\)\n$`).FindStringSubmatch(out)
	if err != nil || m == nil || !rfc3339Seconds.MatchString(m[1]) {
		t.Errorf("agent remove: %v; want \"registered <RFC 3339 to the second>)\":\n%s", err, out)
	}
}
