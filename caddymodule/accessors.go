package caddymodule

import (
	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/edge"
	"github.com/palmgate/palmgate/storage"

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

// The accessors below are what the sibling modules of the app (palmgate_bearer,
// the admin API, the palmgate handler) use: none reads the app's fields.

// Edge is the HTTP edge that the palmgate handler serves.
func (a *App) Edge() *edge.Server { return a.edge }

// OIDC is the OpenID Connect provider.
func (a *App) OIDC() *oidc.Service { return a.oidc }

// Keys is the signing key set.
func (a *App) Keys() *keys.Set { return a.keys }

// Store is the app's store.
func (a *App) Store() storage.Store { return a.store }
