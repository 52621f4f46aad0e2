package caddymodule

import (
	"fmt"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/edge/clientmeta"
)

// Registration configures RFC 7591 dynamic client registration at
// {issuer}/oauth2/register. Off by default: an open endpoint lets anyone put an
// application on palmgate's consent screen (marked as registered by itself), so
// the operator opts in, as MCP deployments do (MCP clients register themselves).
type Registration struct {
	// Open turns registration on.
	Open bool `json:"open,omitempty"`
	// MaxClients bounds the live self-registered clients (-1: no bound).
	// Default: 10000.
	MaxClients int `json:"max_clients,omitempty"`
	// PerNetwork bounds those registered from one client network (an IPv4 /24,
	// an IPv6 /48; counted while the rate limit is on). -1: no bound. Default: 100.
	PerNetwork int `json:"per_network,omitempty"`
	// Unused is how long a client to which no token was ever issued lives; one
	// used lives for refresh_token_ttl after its last use. Default: 24h.
	Unused caddy.Duration `json:"unused,omitempty"`
}

// ClientMetadataDocuments configures client ID metadata documents: a client_id
// that is an https URL is fetched there. Off by default: it makes palmgate fetch
// URLs anyone chooses (bounded: see edge/clientmeta and docs/SECURITY.md).
type ClientMetadataDocuments struct {
	// On turns them on.
	On bool `json:"on,omitempty"`
	// AllowPrivate lets documents live on private, loopback and link-local
	// addresses (a private network's clients; tests). Never on a public server
	// whose internal network holds anything worth a request.
	AllowPrivate bool `json:"allow_private,omitempty"`
}

func (a *App) registrationConfig() oidc.RegistrationConfig {
	if a.Registration == nil {
		return oidc.RegistrationConfig{}
	}
	return oidc.RegistrationConfig{Open: a.Registration.Open, MaxClients: a.Registration.MaxClients,
		MaxPerNetwork: a.Registration.PerNetwork, Unused: time.Duration(a.Registration.Unused)}
}

// clientMetadata is the fetcher of client ID metadata documents, nil when off.
func (a *App) clientMetadata() oidc.MetadataFetcher {
	if a.ClientMetadataDocuments == nil || !a.ClientMetadataDocuments.On {
		return nil
	}
	return clientmeta.New(clientmeta.Config{AllowPrivate: a.ClientMetadataDocuments.AllowPrivate})
}

func (a *App) validateRegistration() error {
	if r := a.Registration; r != nil {
		if r.MaxClients < -1 || r.PerNetwork < -1 {
			return fmt.Errorf("registration max_clients, per_network: must be at least 1, or -1 (no bound)")
		}
		if r.Unused != 0 && r.Unused < caddy.Duration(time.Minute) {
			return fmt.Errorf("registration unused: must be at least 1m, got %s", time.Duration(r.Unused))
		}
	}
	return nil
}

// parseRegistration reads `registration open|off [{ max_clients <n>; per_network
// <n>; unused <duration> }]`.
func parseRegistration(d *caddyfile.Dispenser) (*Registration, error) {
	var mode string
	if !d.Args(&mode) || d.NextArg() {
		return nil, d.Errf("registration: expected `registration open|off`")
	}
	r := &Registration{}
	switch mode {
	case "open":
		r.Open = true
	case "off":
	default:
		return nil, d.Errf("registration: %q is neither open nor off", mode)
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		option := d.Val()
		switch option {
		case "max_clients", "per_network":
			var s string
			if !d.Args(&s) || d.NextArg() {
				return nil, d.Errf("registration %s: expected a number, or off", option)
			}
			n, err := strconv.Atoi(s)
			if s == "off" {
				n, err = -1, nil
			}
			if err != nil || n == 0 || n < -1 {
				return nil, d.Errf("registration %s: %q is not a positive number or off", option, s)
			}
			if option == "max_clients" {
				r.MaxClients = n
			} else {
				r.PerNetwork = n
			}
		case "unused":
			if err := parsePositiveDuration(d, &r.Unused); err != nil {
				return nil, err
			}
		default:
			return nil, d.Errf("registration: unknown option %q", option)
		}
	}
	return r, nil
}

// parseClientMetadataDocuments reads `client_metadata_documents on|off [{
// allow_private }]`.
func parseClientMetadataDocuments(d *caddyfile.Dispenser) (*ClientMetadataDocuments, error) {
	var mode string
	if !d.Args(&mode) || d.NextArg() {
		return nil, d.Errf("client_metadata_documents: expected `client_metadata_documents on|off`")
	}
	c := &ClientMetadataDocuments{}
	switch mode {
	case "on":
		c.On = true
	case "off":
	default:
		return nil, d.Errf("client_metadata_documents: %q is neither on nor off", mode)
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "allow_private":
			if d.NextArg() {
				return nil, d.Errf("client_metadata_documents allow_private: takes no argument")
			}
			c.AllowPrivate = true
		default:
			return nil, d.Errf("client_metadata_documents: unknown option %q", d.Val())
		}
	}
	return c, nil
}
