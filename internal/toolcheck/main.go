// Command toolcheck closes `make test` with one line per group of tests that skipped
// because a tool is missing here, and the command that installs it (see
// internal/tooltest). With PALMGATE_REQUIRE_TOOLS=1 those tests failed instead, and
// it says so.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/palmgate/palmgate/internal/tooltest"
)

func main() {
	require := os.Getenv(tooltest.EnvRequire) == "1"
	for _, tl := range tooltest.All {
		if _, err := tl.Find(); err != nil {
			verb := "SKIPPED"
			if require {
				verb = "FAILED (" + tooltest.EnvRequire + "=1)"
			}
			fmt.Printf("make test: the %s were %s: %v (install: %s)\n", tl.Group, verb, err, tl.Install)
		}
	}
	// The relying parties built from their own modules (cached by the tests' builds).
	for _, m := range tooltest.GoModules {
		if err := m.Build(".", os.DevNull); err != nil {
			fmt.Printf("make test: the %s relying-party test was SKIPPED (FAILED with %s=1): it cannot be built: %v\n",
				m.Name, tooltest.EnvRequire, firstLine(err.Error()))
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
