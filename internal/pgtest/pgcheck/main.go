// Command pgcheck tells, in one line, whether the PostgreSQL tests of `make test`
// can run here, and what to install when they cannot. With
// PALMGATE_REQUIRE_POSTGRES=1 (CI) a missing PostgreSQL is an error.
package main

import (
	"fmt"
	"os"

	"github.com/palmgate/palmgate/internal/pgtest"
)

func main() {
	why := pgtest.Unavailable()
	if why == "" || os.Getenv(pgtest.EnvDSN) != "" {
		return
	}
	if os.Getenv(pgtest.EnvRequire) == "1" {
		fmt.Fprintf(os.Stderr, "make test: the PostgreSQL tests cannot run and %s=1: %s\n", pgtest.EnvRequire, why)
		os.Exit(1)
	}
	fmt.Printf("make test: the PostgreSQL tests will be SKIPPED: %s (Debian: apt-get install postgresql)\n", why)
}
