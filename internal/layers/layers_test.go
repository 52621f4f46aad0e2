package layers

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/palmgate/palmgate"

// rule forbids the packages matching pattern (go list's) to depend, directly or
// through others, on any import path with one of the forbidden prefixes.
type rule struct {
	pattern   string
	why       string
	forbidden []string
}

// rules are the README's Layout rules: each room and what it may not import.
var rules = []rule{
	{"./core/...", "core is the domain: no Caddy, no logger (it returns errors; the edge and the app log), no metrics library (it counts, caddymodule exports), no storage engine, nothing above it",
		[]string{"github.com/caddyserver/", "go.uber.org/zap", "github.com/prometheus/", "github.com/dgraph-io/", "github.com/jackc/",
			module + "/storage/badgerstore", module + "/storage/pgstore", module + "/storage/memstore",
			module + "/edge", module + "/caddymodule", module + "/portal"}},
	{"./storage/...", "storage knows no domain: no core, no edge, no Caddy, no metrics library (its Observer is implemented above it)",
		[]string{module + "/core/", module + "/edge", module + "/caddymodule", module + "/portal", "github.com/caddyserver/", "github.com/prometheus/"}},
	{"./edge/...", "the edge is plain net/http: no Caddy, no storage engine (the app owns the store)",
		[]string{"github.com/caddyserver/", module + "/caddymodule",
			module + "/storage/badgerstore", module + "/storage/pgstore", module + "/storage/memstore"}},
	{"./portal/...", "the portal is plain net/http, mounted by the edge: no Caddy, no storage engine, not the edge",
		[]string{"github.com/caddyserver/", module + "/caddymodule", module + "/edge",
			module + "/storage/badgerstore", module + "/storage/pgstore", module + "/storage/memstore"}},
	{"./cmd/...", "palmgate's build of Caddy links no bench code: the minimal verify handler (bench/minimal, bench/minimalcaddy) is a baseline, registered only in the bench's own binary",
		[]string{module + "/bench"}},
}

// TestImportRules checks every rule on the packages' dependencies as go list
// computes them (test files excluded: tests may use a backend).
func TestImportRules(t *testing.T) {
	for _, r := range rules {
		out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "../../"+strings.TrimPrefix(r.pattern, "./")).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", r.pattern, err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) == 0 || lines[0] == "" {
			t.Fatalf("go list %s listed no package", r.pattern)
		}
		for _, line := range lines {
			fields := strings.Fields(line)
			pkg, deps := fields[0], fields[1:]
			for _, dep := range deps {
				for _, f := range r.forbidden {
					if dep == f || strings.HasPrefix(dep, f) && (strings.HasSuffix(f, "/") || strings.HasPrefix(dep[len(f):], "/")) {
						t.Errorf("%s depends on %s: %s", pkg, dep, r.why)
					}
				}
			}
		}
	}
}
