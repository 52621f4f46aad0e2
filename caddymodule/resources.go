package caddymodule

import (
	"fmt"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/oidc"
)

// The resources palmgate issues tokens for to clients without a `resources` list
// (issue 23): the global `resources` option and the `resource` of every
// palmgate_bearer block of this Caddy (in local mode), which registers its RFC
// 9728 document with the app so that the palmgate handler serves it too.

// parseResources reads `resources <uri> [<uri>...]` (repeatable).
func parseResources(d *caddyfile.Dispenser, into *[]string) error {
	args := d.RemainingArgs()
	if len(args) == 0 {
		return d.Errf("resources: needs at least one resource URI")
	}
	*into = append(*into, args...)
	return nil
}

// validateResources checks the global `resources` option.
func validateResources(uris []string) error {
	for _, u := range uris {
		if !oidc.ValidResource(u) {
			return fmt.Errorf("resources: %q must be an absolute URI without a fragment", u)
		}
	}
	return nil
}

// ProtectResource records the metadata of a resource a palmgate_bearer block of
// this configuration protects: its clients may ask tokens for it, and the
// palmgate handler serves its document.
func (a *App) ProtectResource(md bearer.ResourceMetadata) { a.resources.Add(md) }
