package portal

import (
	"go/format"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestGoSnippetIsExamplesRP: examples/rp is the portal's Go snippet, filled in with
// its own defaults (the README's http://localhost:3000/callback and no client_id):
// what the portal shows is the program the repository builds.
// With PALMGATE_UPDATE_EXAMPLES=1 it writes examples/rp/main.go instead.
func TestGoSnippetIsExamplesRP(t *testing.T) {
	got := newSnippetValues("http://localhost:8080/oauth2", "", "http://localhost:3000/callback", false).render("rp.go.tmpl")
	if os.Getenv("PALMGATE_UPDATE_EXAMPLES") == "1" {
		if err := os.WriteFile("../examples/rp/main.go", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("../examples/rp/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("examples/rp/main.go is not the portal's Go snippet (portal/snippets/rp.go.tmpl); regenerate it with\n"+
			"PALMGATE_UPDATE_EXAMPLES=1 go test -run TestGoSnippetIsExamplesRP ./portal/\nThe snippet is:\n%s", got)
	}
}

// TestSnippetValues: each kind of application gets programs that are well formed
// and carry its values quoted: gofmt'd Go, where the program listens and whether
// it needs a secret.
func TestSnippetValues(t *testing.T) {
	for _, tc := range []struct {
		name, issuer, redirect string
		public                 bool
		listen                 string
		insecure               bool
	}{
		{"http loopback", "http://127.0.0.1:8080/oauth2", "http://127.0.0.1:4567/auth/callback", false, "127.0.0.1:4567", true},
		{"https behind a proxy", "https://id.example.com/oauth2", "https://app.example.com/cb", false, "localhost:3000", false},
		{"http without a port", "https://id.example.com/oauth2", "http://localhost/cb", true, "localhost:80", false},
		{"ipv6 loopback", "https://id.example.com/oauth2", "http://[::1]:3000/cb", false, "[::1]:3000", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newSnippetValues(tc.issuer, "pg_abc", tc.redirect, tc.public)
			if v.Listen != tc.listen || v.Insecure != tc.insecure {
				t.Errorf("listen %q insecure %v, want %q %v", v.Listen, v.Insecure, tc.listen, tc.insecure)
			}
			goSrc := v.render("rp.go.tmpl")
			if formatted, err := format.Source([]byte(goSrc)); err != nil || string(formatted) != goSrc {
				t.Errorf("the Go snippet is not gofmt'd Go (%v):\n%s", err, goSrc)
			}
			if strings.Contains(goSrc, `secret == ""`) == tc.public {
				t.Errorf("public %v: the Go snippet's secret check is wrong:\n%s", tc.public, goSrc)
			}
			for _, name := range []string{"rp.go.tmpl", "rp.mjs.tmpl", "rp.py.tmpl"} {
				code := v.render(name)
				if code == "" || !strings.Contains(code, `"pg_abc"`) || !strings.Contains(code, `"`+tc.redirect+`"`) {
					t.Errorf("%s lacks the client_id or the redirect URI, quoted:\n%s", name, code)
				}
			}
			if node := v.render("rp.mjs.tmpl"); strings.Contains(node, "allowInsecureRequests") != tc.insecure {
				t.Errorf("the Node snippet's allowInsecureRequests for an issuer %s:\n%s", tc.issuer, node)
			}
			// The Node and Python programs parse (when node and python3 are here; the
			// integration test TestPortalSnippets runs them).
			for _, c := range []struct {
				tool, tmpl string
				args       []string
			}{
				{"node", "rp.mjs.tmpl", []string{"--input-type=module", "--check"}},
				{"python3", "rp.py.tmpl", []string{"-c", "import ast, sys; ast.parse(sys.stdin.read())"}},
			} {
				if _, err := exec.LookPath(c.tool); err != nil {
					continue
				}
				cmd := exec.Command(c.tool, c.args...)
				cmd.Stdin = strings.NewReader(v.render(c.tmpl))
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("%s does not parse: %v\n%s", c.tmpl, err, out)
				}
			}
		})
	}
}
