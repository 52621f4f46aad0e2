package caddymodule

import (
	// The demo relying party (palmgate_demo) is registered with the rest, so that
	// `xcaddy build --with github.com/palmgate/palmgate/caddymodule` builds every
	// module Caddyfile.example uses. It reaches the app only through the accessors
	// below.
	_ "github.com/palmgate/palmgate/caddymodule/demo"
)

// DevMode reports whether the app runs in dev mode (simulated palm scans).
func (a *App) DevMode() bool { return a.Dev }

// IssuerURL is the public base URL of the service.
func (a *App) IssuerURL() string { return a.Issuer }

// StaticClient returns the configured (Caddyfile) client id with its display
// name, its clear secret ("" when only a hash is configured) and redirect URIs.
func (a *App) StaticClient(id string) (name, secret string, redirectURIs []string, ok bool) {
	for _, c := range a.Clients {
		if c.ID == id {
			return c.Name, c.Secret, c.RedirectURIs, true
		}
	}
	return "", "", nil, false
}
