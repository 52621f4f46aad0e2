// Command caddy is the palmgate build of Caddy: Caddy's standard modules plus
// palmgate's, exactly what `xcaddy build --with github.com/palmgate/palmgate/caddymodule`
// generates.
package main

import (
	_ "time/tzdata"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/palmgate/palmgate/caddymodule"
)

func main() {
	caddycmd.Main()
}
