// Package tooltest finds the outside programs some integration tests drive
// (Chromium, nginx, Node and npm, the relying parties built from their own modules
// under integration/rp), and says, in the same words for the tests and for
// `make test`'s closing lines (internal/toolcheck), what is missing and how to
// install it. With PALMGATE_REQUIRE_TOOLS=1 (CI) a missing tool fails its tests
// instead of skipping them.
package tooltest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// EnvRequire names the variable that, set to 1, turns every skip for a missing tool
// into a failure.
const EnvRequire = "PALMGATE_REQUIRE_TOOLS"

// Tool is an outside program a group of tests needs.
type Tool struct {
	// Group names the tests that need it, as `make test` reports them.
	Group string
	// Install is the command that installs it on Debian.
	Install string
	find    func() (string, error)
}

// The tools of the integration tests.
var (
	Chromium = Tool{Group: "browser and relying-party tests (Chromium)", Install: "apt-get install chromium", find: findChromium}
	Nginx    = Tool{Group: "nginx gateway tests", Install: "apt-get install nginx", find: fixedPath("/usr/sbin/nginx")}
	Apache   = Tool{Group: "mod_auth_openidc back-channel logout test (Apache)", Install: "apt-get install apache2 libapache2-mod-auth-openidc", find: findApache}
	Node     = Tool{Group: "openid-client and Auth.js relying-party tests (Node and npm)", Install: "apt-get install nodejs npm", find: findNode}
	Go       = Tool{Group: "oauth2-proxy and zitadel relying-party tests (go build of integration/rp)", Install: "a Go toolchain on PATH and the Go module proxy", find: lookPath("go")}
	Authlib  = Tool{Group: "portal's Python snippet tests (python3 with Authlib, Flask and requests)", Install: "apt-get install python3-authlib python3-flask python3-requests", find: findAuthlib}
)

// All is every tool, in the order `make test` reports them.
var All = []Tool{Chromium, Nginx, Apache, Node, Go, Authlib}

// findAuthlib finds a python3 that imports what the portal's Python snippet does:
// Debian's (where apt installs python3-authlib), else the one on PATH.
func findAuthlib() (string, error) {
	var why []string
	for _, python := range []string{"/usr/bin/python3", "python3"} {
		p, err := exec.LookPath(python)
		if err != nil {
			why = append(why, python+" is missing")
			continue
		}
		out, err := exec.Command(p, "-c", "import authlib, flask, requests").CombinedOutput()
		if err == nil {
			return p, nil
		}
		why = append(why, p+": "+lastLine(string(out)))
	}
	return "", fmt.Errorf("no python3 imports authlib, flask and requests (%s)", strings.Join(why, "; "))
}

// lastLine is s's last non-empty line (a Python traceback's error).
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// Find returns the tool's path, or why it is missing.
func (tl Tool) Find() (string, error) { return tl.find() }

// Need returns the tool's path, or skips the test (fails it with
// PALMGATE_REQUIRE_TOOLS=1) saying what is missing and how to install it.
func (tl Tool) Need(t testing.TB) string {
	t.Helper()
	p, err := tl.find()
	if err != nil {
		Missing(t, fmt.Sprintf("%s: %v (install: %s)", tl.Group, err, tl.Install))
	}
	return p
}

// Missing skips the test with reason, or fails it when PALMGATE_REQUIRE_TOOLS=1.
func Missing(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("%s=1 and %s", EnvRequire, reason)
	}
	t.Skipf("SKIPPED %s", reason)
}

func findChromium() (string, error) {
	for _, p := range []string{os.Getenv("PALMGATE_CHROMIUM"), "/usr/bin/chromium"} {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("no chromium at $PALMGATE_CHROMIUM or /usr/bin/chromium")
}

func findNode() (string, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return "", fmt.Errorf("node is not on PATH")
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "", fmt.Errorf("npm is not on PATH")
	}
	return node, nil
}

// findApache finds Debian's apache2 with mod_auth_openidc beside it.
func findApache() (string, error) {
	if _, err := fixedPath("/usr/lib/apache2/modules/mod_auth_openidc.so")(); err != nil {
		return "", err
	}
	return fixedPath("/usr/sbin/apache2")()
}

func fixedPath(p string) func() (string, error) {
	return func() (string, error) {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s is missing", p)
		}
		return p, nil
	}
}

func lookPath(name string) func() (string, error) {
	return func() (string, error) {
		p, err := exec.LookPath(name)
		if err != nil {
			return "", fmt.Errorf("%s is not on PATH", name)
		}
		return p, nil
	}
}

// GoModule is a relying party built from its own module under integration/rp.
type GoModule struct {
	Name string
	// Dir is the module's directory, from the repository's root.
	Dir string
	// Pkg is the main package to build there.
	Pkg string
}

// The relying parties built from their own modules.
var (
	OAuth2Proxy = GoModule{Name: "oauth2-proxy", Dir: "integration/rp/oauth2proxy", Pkg: "github.com/oauth2-proxy/oauth2-proxy/v7"}
	ZitadelRP   = GoModule{Name: "zitadelrp", Dir: "integration/rp/zitadel", Pkg: "."}
)

// GoModules is every such module, in the order `make test` reports them.
var GoModules = []GoModule{OAuth2Proxy, ZitadelRP}

// Build builds the module into out, from root (the repository's root); for
// `make test`'s closing lines (the tests use GoTool).
func (m GoModule) Build(root, out string) error {
	goBin, err := Go.Find()
	if err != nil {
		return err
	}
	cmd := exec.Command(goBin, "build", "-o", out, m.Pkg)
	cmd.Dir = filepath.Join(root, m.Dir)
	if o, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s in %s: %v\n%s", m.Pkg, m.Dir, err, o)
	}
	return nil
}

// Need builds the module once per test process (see GoTool); root is the
// repository's root from the test's directory ("..").
func (m GoModule) Need(t testing.TB, root string) string {
	t.Helper()
	return GoTool(t, filepath.Join(root, m.Dir), m.Pkg, m.Name)
}

// GoTool builds the main package pkg of the tool module in dir (its own go.mod,
// not palmgate's) once per test process, into a directory removed by Cleanup. A
// failed build skips the test (fails it with PALMGATE_REQUIRE_TOOLS=1), with the
// build's output.
func GoTool(t testing.TB, dir, pkg, name string) string {
	t.Helper()
	goBin := Go.Need(t)
	builds.mu.Lock()
	b, ok := builds.byPkg[pkg]
	if !ok {
		b = &build{}
		if builds.byPkg == nil {
			builds.byPkg = map[string]*build{}
		}
		builds.byPkg[pkg] = b
	}
	builds.mu.Unlock()
	b.once.Do(func() {
		out, err := os.MkdirTemp("", "palmgate-rp-")
		if err != nil {
			b.err = err
			return
		}
		builds.mu.Lock()
		builds.dirs = append(builds.dirs, out)
		builds.mu.Unlock()
		b.path = filepath.Join(out, name)
		cmd := exec.Command(goBin, "build", "-o", b.path, pkg)
		cmd.Dir = dir
		if o, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s in %s: %v\n%s", pkg, dir, err, o)
		}
	})
	if b.err != nil {
		Missing(t, fmt.Sprintf("%s cannot be built: %v", name, b.err))
	}
	return b.path
}

type build struct {
	once sync.Once
	path string
	err  error
}

var builds struct {
	mu    sync.Mutex
	byPkg map[string]*build
	dirs  []string
}

// Cleanup removes what GoTool built; call it from TestMain after m.Run.
func Cleanup() {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	for _, d := range builds.dirs {
		os.RemoveAll(d)
	}
	builds.dirs = nil
}
