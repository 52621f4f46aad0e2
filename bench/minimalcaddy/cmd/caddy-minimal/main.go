// Command caddy-minimal is the bench's own build of Caddy: Caddy's standard
// modules, as in palmgate's cmd/caddy, plus the minimal server's verify handler
// (bench/minimalcaddy) instead of palmgate's. The load script builds it into a
// temporary directory for its scenario minimal-caddy; it is never installed.
package main

import (
	_ "time/tzdata"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/palmgate/palmgate/bench/minimalcaddy"
)

func main() {
	caddycmd.Main()
}
