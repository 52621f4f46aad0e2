package caddymodule

import (
	"fmt"
	"net/http"

	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/portal"
)

// PortalConfig configures the developer portal at /portal.
type PortalConfig struct {
	// Off turns the portal off (/portal answers 404).
	Off bool `json:"off,omitempty"`
	// MaxApplications bounds the applications one developer may own. Default: 20.
	MaxApplications int `json:"max_applications,omitempty"`
}

func (a *App) portalOn() bool { return a.Portal == nil || !a.Portal.Off }

// maxApplications is the per-developer bound of dynamic clients.
func (a *App) maxApplications() int {
	if a.Portal != nil && a.Portal.MaxApplications > 0 {
		return a.Portal.MaxApplications
	}
	return oidc.DefaultMaxClientsOwner
}

// validatePortal checks the portal's options and that no static client takes its
// reserved client id.
func (a *App) validatePortal() error {
	if a.Portal != nil && a.Portal.MaxApplications < 0 {
		return fmt.Errorf("portal: max_applications must be at least 1, got %d", a.Portal.MaxApplications)
	}
	for _, c := range a.Clients {
		if c.ID == portal.ClientID {
			return fmt.Errorf("client %s: this client_id is reserved for the developer portal", c.ID)
		}
	}
	return nil
}

// withPortalClient adds the portal's own client to the static clients when it is on.
func (a *App) withPortalClient(clients []oidc.Client) []oidc.Client {
	if !a.portalOn() {
		return clients
	}
	return append(clients, portal.StaticClient(a.Issuer))
}

// portalHandler is the portal the edge mounts at /portal, or nil when it is off
// (the edge then answers 404).
func (a *App) portalHandler() http.Handler {
	if !a.portalOn() {
		return nil
	}
	return portal.New(portal.Config{OIDC: a.oidc, Store: a.store, Issuer: a.Issuer, Dev: a.Dev, Logger: a.logger.Named("portal"), Brand: a.brand()})
}
