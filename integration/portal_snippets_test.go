package integration

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
	"github.com/palmgate/palmgate/internal/tooltest"
)

// portalSnippet reads the snippet id (go, node, python) off an application's
// page as a browser shows it: the text of <pre id="snippet-{id}">, unescaped.
func portalSnippet(t *testing.T, page []byte, id string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<pre id="snippet-` + id + `">(.*?)</pre>`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("the application page has no snippet %q:\n%s", id, testserver.Snippet(page))
	}
	return html.UnescapeString(string(m[1]))
}

// TestPortalSnippets: each snippet of the portal, as the page shows it for a new
// application (its client_id, the secret in PALMGATE_CLIENT_SECRET, a redirect URI
// on loopback), is saved as the page says and run, and logs a user in through
// Chromium: Go (go-oidc, built with palmgate's module versions), Node
// (openid-client from integration/rp/openidclient's committed lockfile), Python
// (Authlib, when python3 has it; else skipped, as make test's closing lines say);
// the Go and Node ones for a public client too, without a secret.
func TestPortalSnippets(t *testing.T) {
	t.Parallel()
	e := startOIDC(t, nil)
	dev := e.portalSignIn(t, e.subject("snippet-dev"))
	ctx := startChromium(t)

	buildGo := func(t *testing.T, dir string) *exec.Cmd {
		goBin := tooltest.Go.Need(t)
		goModFor(t, dir)
		build := exec.Command(goBin, "build", "-mod=mod", "-o", "rp", ".")
		build.Dir = dir
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("the Go snippet does not build: %v\n%s", err, out)
		}
		return exec.Command(filepath.Join(dir, "rp"))
	}
	for _, tc := range []struct {
		name, id, file string
		public         bool
		run            func(t *testing.T, dir string) *exec.Cmd
	}{
		{"go", "go", "main.go", false, buildGo},
		{"go public client", "go", "main.go", true, buildGo},
		{"node", "node", "rp.mjs", false, func(t *testing.T, dir string) *exec.Cmd {
			node := tooltest.Node.Need(t)
			npmCI(t, "rp/openidclient")
			modules, err := filepath.Abs("rp/openidclient/node_modules")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
				t.Fatal(err)
			}
			return exec.Command(node, "rp.mjs")
		}},
		{"node public client", "node", "rp.mjs", true, func(t *testing.T, dir string) *exec.Cmd {
			npmCI(t, "rp/openidclient")
			modules, err := filepath.Abs("rp/openidclient/node_modules")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
				t.Fatal(err)
			}
			return exec.Command(tooltest.Node.Need(t), "rp.mjs")
		}},
		{"python", "python", "app.py", false, func(t *testing.T, dir string) *exec.Cmd {
			return exec.Command(tooltest.Authlib.Need(t), "app.py")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := testserver.FreePort(t)
			base := fmt.Sprintf("http://127.0.0.1:%d", port)
			form := url.Values{"csrf": {dev.csrf(t)}, "name": {"Snippet " + tc.name}, "redirect_uris": {base + "/auth/callback"}}
			if tc.public {
				form.Set("public", "on")
			}
			r := dev.post(t, "/portal/apps", form)
			if r.Status != http.StatusOK {
				t.Fatalf("creating the application: %d %s", r.Status, testserver.Snippet(r.Body))
			}
			var id, secret string
			if tc.public {
				m := clientIDRE.FindSubmatch(r.Body)
				if m == nil || strings.Contains(string(r.Body), `id="secret"`) {
					t.Fatalf("a public application's page: want a client_id and no secret:\n%s", testserver.Snippet(r.Body))
				}
				id = html.UnescapeString(string(m[1]))
			} else {
				id, secret = pageClient(t, r.Body)
			}
			code := portalSnippet(t, r.Body, tc.id)
			if !strings.Contains(code, id) || !strings.Contains(code, e.URL+"/oauth2") || !strings.Contains(string(r.Body), "Save it as <code>"+tc.file+"</code>") {
				t.Fatalf("the %s snippet is not filled in with the client_id and issuer, or not saved as %s:\n%s", tc.id, tc.file, code)
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, tc.file), []byte(code), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := tc.run(t, dir)
			cmd.Dir = dir
			cmd.Env = os.Environ()
			if !tc.public {
				cmd.Env = append(cmd.Env, "PALMGATE_CLIENT_SECRET="+secret)
			}
			out := &logBuffer{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatalf("starting the %s snippet: %v", tc.id, err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-exited
				if t.Failed() {
					t.Logf("the %s snippet's output:\n%s", tc.id, out.String())
				}
			})
			noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			waitUntil(t, 60*time.Second, "the "+tc.id+" snippet serves its login at "+base+"/", func() bool {
				select {
				case err := <-exited:
					exited <- err // for Cleanup
					t.Fatalf("the %s snippet exited: %v\n%s", tc.id, err, out.String())
				default:
				}
				resp, err := noRedirect.Get(base + "/")
				if err != nil {
					return false
				}
				resp.Body.Close()
				return resp.StatusCode == http.StatusFound && strings.HasPrefix(resp.Header.Get("Location"), e.URL+"/oauth2/authorize?")
			})
			done := simulateLogin(t, ctx, base+"/", e.subject("snippet-"+tc.id), "#signed-in")
			sub, ok := strings.CutPrefix(done, "Signed in with palmgate as ")
			if !ok || !subRE.MatchString(sub) {
				t.Fatalf("the %s snippet shows %q after the login, want \"Signed in with palmgate as <pairwise sub>\"", tc.id, done)
			}
		})
	}
}

// goModFor writes the go.mod and go.sum `go mod init rp && go mod tidy` would give
// the Go snippet in dir, pinned to palmgate's own versions of go-oidc and x/oauth2
// (so the test builds offline from the module cache palmgate's build filled).
func goModFor(t *testing.T, dir string) {
	t.Helper()
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("module rp\n\n")
	b.WriteString(regexp.MustCompile(`(?m)^go \S+$`).FindString(string(mod)) + "\n\nrequire (\n")
	for _, path := range []string{"github.com/coreos/go-oidc/v3", "golang.org/x/oauth2", "github.com/go-jose/go-jose/v4"} {
		m := regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(path) + ` (\S+)`).FindStringSubmatch(string(mod))
		if m == nil {
			t.Fatalf("palmgate's go.mod does not require %s", path)
		}
		fmt.Fprintf(&b, "\t%s %s\n", path, m[1])
	}
	b.WriteString(")\n")
	sum, err := os.ReadFile("../go.sum")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
}
