// Package caddymodule plugs palmgate into Caddy: the `palmgate` app (global option:
// config, the pooled store, the wiring of the core services and of the HTTP edge),
// the `palmgate` handler (which hands requests to the edge), the `palmgate_bearer`
// middleware, the admin API routes, the CLI commands and their Caddyfile parsing.
// It only translates between Caddy and core/ and edge/.
package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/agent"
	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/edge"
	"github.com/palmgate/palmgate/edge/backchannel"
	"github.com/palmgate/palmgate/internal/brand"
	"github.com/palmgate/palmgate/storage"
)

func init() {
	caddy.RegisterModule(App{})
}

// Defaults of the app's options.
const (
	DefaultAccessTokenTTL         = oidc.DefaultAccessTTL
	DefaultRefreshTokenTTL        = oidc.DefaultRefreshTTL
	DefaultAuthCodeTTL            = oidc.DefaultCodeTTL
	DefaultLoginTTL               = oidc.DefaultLoginTTL
	DefaultRegistrationSessionTTL = 15 * time.Minute
	DefaultChallengeMaxAge        = 5 * time.Minute
	DefaultRateLimitRequests      = 120
	DefaultRateLimitWindow        = time.Minute
	DefaultMaxPending             = 50000
	// DefaultPendingNetworkShare: a network's default cap is this fraction of the
	// global one (781 of 50000), so filling the global cap takes 65 networks; but
	// at least DefaultPendingNetworkFloor (or the whole cap, if lower), so that a
	// small cap does not leave a network a handful of logins.
	DefaultPendingNetworkShare = 64
	DefaultPendingNetworkFloor = 100
)

// App is the palmgate identity service: it owns the store, the keys and the domain
// services that the `palmgate` handler serves. It is configured by the `palmgate`
// global option.
type App struct {
	// Issuer is the public base URL of the service, with no path, such as
	// https://id.example.com. It prefixes every URL palmgate hands out and is the
	// audience of palm assertions; the OpenID Connect issuer is Issuer + "/oauth2".
	Issuer string `json:"issuer,omitempty"`

	// Storage selects where state lives. Default: Badger under Caddy's data
	// directory, in palmgate/.
	Storage *StorageConfig `json:"storage,omitempty"`

	// Dev enables local development: a built-in palm attestor, simulated palm scans
	// (the dev-scan route and the pages' "Simulate palm scan" button). Never in
	// production.
	Dev bool `json:"dev,omitempty"`

	// PalmAttestors are the trusted palm-matching engines whose signed assertions
	// complete palm challenges.
	PalmAttestors []PalmAttestor `json:"palm_attestors,omitempty"`

	// PairwiseSecret keys the pairwise subject identifiers. Default: generated once
	// and kept in the store. Placeholders such as {env.PALMGATE_PAIRWISE_SECRET}
	// work, and keep it out of the admin API and autosave.json.
	PairwiseSecret string `json:"pairwise_secret,omitempty"`

	// AccessTokenTTL is the lifetime of access tokens. Default: 1h.
	AccessTokenTTL caddy.Duration `json:"access_token_ttl,omitempty"`

	// RefreshTokenTTL is the lifetime of refresh tokens. Default: 2160h (90 days).
	RefreshTokenTTL caddy.Duration `json:"refresh_token_ttl,omitempty"`

	// AuthCodeTTL is the lifetime of authorization codes. Default: 5m.
	AuthCodeTTL caddy.Duration `json:"auth_code_ttl,omitempty"`

	// LoginTTL is how long a person has to complete a login: the pending
	// authorization request and its palm challenge (the QR code) live this long.
	// Default: 10m.
	LoginTTL caddy.Duration `json:"login_ttl,omitempty"`

	// RateLimit bounds unauthenticated writes per client IP.
	RateLimit *RateLimit `json:"rate_limit,omitempty"`

	// RegistrationSessionTTL is the lifetime of an agent registration session (and
	// of its palm challenge). Default: 15m.
	RegistrationSessionTTL caddy.Duration `json:"registration_session_ttl,omitempty"`

	// SSOSession turns on the single sign-on session: a palm scan at login signs
	// the browser in to palmgate for this long (absolute, from the scan), and
	// within it authorization requests get a code without a scan, after a one-click
	// consent the first time an application asks for a set of scopes. Logout ends
	// it on every instance. Default: off (0): every login scans.
	SSOSession caddy.Duration `json:"sso_session,omitempty"`

	// ChallengeMaxAge is how far an agent challenge's timestamp may be from the
	// server's clock, in either direction. Default: 5m.
	ChallengeMaxAge caddy.Duration `json:"challenge_max_age,omitempty"`

	// MaxPendingLogins caps the logins this instance started and that may still be
	// unfinished (started within their lifetime plus 10 minutes): past it,
	// /oauth2/authorize answers 503 with Retry-After (the time until the oldest of
	// them lapses), so a flood of unauthenticated requests fills a bounded amount of
	// disk. -1 turns the cap off. Default: 50000.
	MaxPendingLogins int `json:"max_pending_logins,omitempty"`

	// MaxPendingLoginsPerNetwork caps, beneath MaxPendingLogins, those that one
	// client network started (an IPv4 /24, an IPv6 /48, as the rate limit sees
	// the client): past it that network gets 429 with Retry-After, and the others
	// still get in. Counted only while the rate limit is on (with it off, every
	// client may share one address). -1 turns it off. Default: a 64th of
	// MaxPendingLogins (781 of 50000), at least 100 (or MaxPendingLogins if lower).
	MaxPendingLoginsPerNetwork int `json:"max_pending_logins_per_network,omitempty"`

	// MaxPendingRegistrations is the same cap for agent registration sessions, at
	// /v1/agent/register/init. Default: 50000.
	MaxPendingRegistrations int `json:"max_pending_registrations,omitempty"`

	// MaxPendingRegistrationsPerNetwork is MaxPendingLoginsPerNetwork for agent
	// registration sessions. Default: a 64th of MaxPendingRegistrations.
	MaxPendingRegistrationsPerNetwork int `json:"max_pending_registrations_per_network,omitempty"`

	// Clients are the OpenID Connect relying parties allowed to log users in.
	Clients []Client `json:"clients,omitempty"`

	// Portal configures the developer portal at /portal (on by default).
	Portal *PortalConfig `json:"portal,omitempty"`

	// PalmAppURL is where a person gets the palm app (an app store page, say). A
	// phone without the app opens a scan URL ("Open in your palm app") in the
	// browser, which then shows a page that says what the app is and links here;
	// without it, the page says so in neutral words. An https URL.
	PalmAppURL string `json:"palm_app_url,omitempty"`

	// KeyRotation rotates the token signing keys (every algorithm) once the active
	// key is this old, such as 720h; one instance of those sharing a store does.
	// A retired key stays in the JWKS until every token it signed has expired,
	// then it is deleted. Default: off (rotate with the admin API or
	// `caddy palmgate keys rotate`; retired keys are deleted all the same).
	KeyRotation caddy.Duration `json:"key_rotation,omitempty"`

	// Registration configures RFC 7591 dynamic client registration (registration.go).
	// Default: off.
	Registration *Registration `json:"registration,omitempty"`

	// ClientMetadataDocuments configures client ID metadata documents
	// (registration.go). Default: off.
	ClientMetadataDocuments *ClientMetadataDocuments `json:"client_metadata_documents,omitempty"`
	// Resources are RFC 8707 resource indicators (absolute URIs without a
	// fragment) that a client without its own `resources` list may ask tokens
	// for, beside those the palmgate_bearer blocks of this Caddy name with
	// `resource` (an MCP client, which registers itself, has no list).
	Resources []string `json:"resources,omitempty"`
	// Brand is the operator's name, logo and accent colour on every page (login,
	// registration, consent, signed-out, agents, portal). The name is at most 64
	// printable characters; logo_url an absolute https URL (http only on a
	// loopback host or in dev mode), whose origin alone the pages' CSP admits for
	// images; color a CSS hex colour (#0b5fff or #05f). Default: palmgate's own.
	Brand *brand.Brand `json:"brand,omitempty"`

	store    storage.Store
	storeKey string
	palm     *palm.Service
	agents   *agent.Service
	keys     *keys.Set
	oidc     *oidc.Service
	edge     *edge.Server
	logger   *zap.Logger
	events   event.Sink // counts events and writes the audit log (metrics.go)

	ctx caddy.Context // of this config generation, for the work Start starts
	// backchannel delivers logout tokens (backchannel.go).
	backchannel *backchannel.Sender
	stopWatch   func() // ends the key watcher and maintenance Start started and waits for them

	resources *bearer.Resources // Resources and the bearer blocks' (resources.go)
}

// PalmAttestor is a trusted palm engine.
type PalmAttestor struct {
	// Name is the attestor's name, the `iss` of its assertions.
	Name string `json:"name,omitempty"`
	// PublicKey is its Ed25519 or P-256 public key as base64 DER SubjectPublicKeyInfo
	// or its PEM; placeholders such as {file./etc/palmgate/engine.pub} work. The key
	// type pins the algorithm (EdDSA or ES256).
	PublicKey string `json:"public_key,omitempty"`
}

// RateLimit bounds requests per client IP over a window.
type RateLimit struct {
	// Off disables the limit.
	Off bool `json:"off,omitempty"`
	// Requests is how many requests one client IP may make per window.
	Requests int `json:"requests,omitempty"`
	// Window is the length of the window.
	Window caddy.Duration `json:"window,omitempty"`
}

// Client is an OpenID Connect relying party.
type Client struct {
	// ID is the client_id.
	ID string `json:"client_id,omitempty"`
	// Secret is the client_secret; placeholders such as {env.APP_SECRET} work. It
	// appears in clear in Caddy's config (admin API, autosave.json): prefer
	// SecretHash, or a placeholder.
	Secret string `json:"secret,omitempty"`
	// SecretHash, instead of Secret, is a hash of the client_secret, so that the
	// config holds nothing usable: `sha256:<64 hex digits>` (for long random
	// secrets) or an argon2id PHC string
	// `$argon2id$v=19$m=<KiB>,t=<iterations>,p=<threads>$<salt>$<hash>` (salt and
	// hash in unpadded base64; m at most 262144, t and p at most 16), as
	// `caddy palmgate hash-secret` prints.
	SecretHash string `json:"secret_hash,omitempty"`
	// RedirectURIs are the registered redirect URIs, matched exactly. A client without
	// any cannot log users in, but can introspect and revoke tokens (a resource server).
	RedirectURIs []string `json:"redirect_uris,omitempty"`
	// Name is shown to the person on the login page.
	Name string `json:"name,omitempty"`
	// Sector is the pairwise sector of the client's subjects. Default: the client_id.
	Sector string `json:"sector,omitempty"`
	// Scopes are the scopes the client may ask for beside the standard profile,
	// email, address and phone, which every client is granted without claims (but a
	// pseudonymous preferred_username under profile); a request for any other is
	// refused with invalid_scope. Default: openid offline_access.
	Scopes []string `json:"scopes,omitempty"`
	// Resources are the RFC 8707 resource indicators (absolute URIs without a
	// fragment) the client may ask access tokens for with the `resource` parameter;
	// the token's aud is then that resource. Another is refused with invalid_target.
	Resources []string `json:"resources,omitempty"`
	// PostLogoutRedirectURIs are where an RP-initiated logout (/oauth2/logout) may
	// send the browser back, matched exactly; another is refused with a 400 page.
	PostLogoutRedirectURIs []string `json:"post_logout_redirect_uris,omitempty"`
	// BackchannelLogoutURI is where palmgate POSTs a logout token (OpenID Connect
	// Back-Channel Logout 1.0) when it ends one of the client's logins otherwise
	// than by the client's own token revocation: an RP-initiated logout, the
	// operator ending the person with revoke=grants, a refresh token or code used
	// twice. An absolute http or https URL without a fragment; http on any host
	// (the operator's client may be an intranet application).
	BackchannelLogoutURI string `json:"backchannel_logout_uri,omitempty"`
	// IDTokenSignedResponseAlg is the algorithm of the client's ID tokens: RS256
	// (the default, OpenID Connect's mandatory one), ES256 or EdDSA (Ed25519), which
	// are much cheaper to sign. Access tokens are ES256 whatever it is.
	IDTokenSignedResponseAlg string `json:"id_token_signed_response_alg,omitempty"`
	// AccessTokenAudience is the `aud` of the client's access tokens when it asks
	// for no `resource`: base_url (the default: the issuer option's URL, what
	// palmgate_bearer's audience expects), client_id (what oauth2-proxy's bearer mode
	// and oauth4webapi expect), or both. A granted `resource` is the aud alone,
	// whatever this says.
	AccessTokenAudience string `json:"access_token_audience,omitempty"`
	// Public declares a client that cannot keep a secret (a browser app, a native
	// app): it has no secret (token_endpoint_auth_method none), must use PKCE S256,
	// and its refresh tokens rotate on every use.
	Public bool `json:"public,omitempty"`
	// AllowedOrigins are the origins (scheme://host[:port]) whose browser pages may
	// call the token, userinfo and revocation endpoints for this client (CORS).
	// A public client's redirect URIs' origins are allowed without being listed.
	AllowedOrigins []string `json:"allowed_origins,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "palmgate",
		New: func() caddy.Module { return new(App) },
	}
}

// Provision sets defaults, opens the store and builds the services.
func (a *App) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger()
	// The process-wide series first, before anything that may refuse the config:
	// Caddy has already swapped the admin endpoint (and its /metrics) to this
	// config's registry, and keeps it when the load fails, while the config
	// before it still serves.
	if err := registerStoreMetrics(ctx.GetMetricsRegistry()); err != nil {
		return err
	}
	if err := registerMetrics(ctx); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	a.warnSecretsInConfig(a.logger) // before setDefaults replaces the placeholders
	a.setDefaults()
	if err := a.Validate(); err != nil {
		return err
	}
	if err := a.openStore(); err != nil {
		return err
	}
	events := newEventSink(a.logger.Named(AuditLoggerName))
	a.events = events
	var err error
	a.palm, err = palm.NewService(palm.Config{
		Store: a.store, Issuer: a.Issuer, AttestorKeys: a.attestors(), Dev: a.Dev, Events: events,
		MaxPending: map[palm.Purpose]int{
			palm.PurposeLogin:             a.MaxPendingLogins,
			palm.PurposeAgentRegistration: a.MaxPendingRegistrations,
			palm.PurposeAgentManagement:   a.MaxPendingLogins, // the agents page: a sign-in
		},
		MaxPendingPerNetwork: map[palm.Purpose]int{
			palm.PurposeLogin:             a.MaxPendingLoginsPerNetwork,
			palm.PurposeAgentRegistration: a.MaxPendingRegistrationsPerNetwork,
			palm.PurposeAgentManagement:   a.MaxPendingLoginsPerNetwork,
		},
	})
	if err != nil {
		return err
	}
	a.agents = agent.NewService(agent.Config{
		Store:           a.store,
		Palm:            a.palm,
		Issuer:          a.Issuer,
		SessionTTL:      time.Duration(a.RegistrationSessionTTL),
		ChallengeMaxAge: time.Duration(a.ChallengeMaxAge),
		Events:          events,
	})
	if a.keys, err = keys.Open(ctx, a.store, nil, keys.WithLifetimes(a.tokenLifetimes())); err != nil {
		return fmt.Errorf("loading signing keys: %w", err)
	}
	a.ctx = ctx
	a.resources = &bearer.Resources{}
	a.resources.Allow(a.Resources...)
	a.oidc, err = oidc.NewService(ctx, oidc.Config{
		Store: a.store, Palm: a.palm, Keys: a.keys, Issuer: a.Issuer, Clients: a.withPortalClient(a.oidcClients()),
		PairwiseSecret: a.PairwiseSecret, DevRedirects: a.Dev, MaxClientsPerOwner: a.maxApplications(),
		AccessTTL:    time.Duration(a.AccessTokenTTL),
		RefreshTTL:   time.Duration(a.RefreshTokenTTL),
		CodeTTL:      time.Duration(a.AuthCodeTTL),
		LoginTTL:     time.Duration(a.LoginTTL),
		Events:       events,
		SSOSession:   time.Duration(a.SSOSession),
		Registration: a.registrationConfig(), ClientMetadata: a.clientMetadata(),
		Resources: a.resources,
		Agents:    a.agents,
		// A nil *Sender in the interface would not be nil: the field is set only
		// once the sender exists.
		BackchannelLogout: a.newBackchannel(),
	})
	if err != nil {
		return err
	}
	// Removing an agent, by any route, ends its grants to act for its human.
	a.agents.OnRemoved(func(ctx context.Context, r agent.Removed) error {
		return a.oidc.RevokeAgentGrants(ctx, r.HumanID, r.DeviceID)
	})
	a.edge = edge.New(edge.Config{
		Issuer: a.Issuer, Palm: a.palm, Agents: a.agents, OIDC: a.oidc, Keys: a.keys, PalmAppURL: a.PalmAppURL,
		RateLimit: edge.RateLimit{Off: a.RateLimit.Off, Requests: a.RateLimit.Requests, Window: time.Duration(a.RateLimit.Window)},
		ClientIP:  clientIP,
		Portal:    a.portalHandler(),
		Logger:    a.logger,
		Store:     a.store,
		Resources: a.resources,
		Brand:     a.brand(),
	})
	a.warnKeyRotation()
	if a.Dev {
		a.logger.Warn("palmgate dev mode: palm scans can be simulated; never use it in production")
	}
	return nil
}

func (a *App) setDefaults() {
	a.Issuer = strings.TrimSuffix(a.Issuer, "/")
	if a.Storage == nil {
		a.Storage = &StorageConfig{}
	}
	a.Storage.setDefaults()
	defaultDuration(&a.AccessTokenTTL, DefaultAccessTokenTTL)
	defaultDuration(&a.RefreshTokenTTL, DefaultRefreshTokenTTL)
	defaultDuration(&a.AuthCodeTTL, DefaultAuthCodeTTL)
	defaultDuration(&a.LoginTTL, DefaultLoginTTL)
	defaultDuration(&a.RegistrationSessionTTL, DefaultRegistrationSessionTTL)
	defaultDuration(&a.ChallengeMaxAge, DefaultChallengeMaxAge)
	for _, c := range [][2]*int{{&a.MaxPendingLogins, &a.MaxPendingLoginsPerNetwork}, {&a.MaxPendingRegistrations, &a.MaxPendingRegistrationsPerNetwork}} {
		total, perNetwork := c[0], c[1]
		if *total == 0 {
			*total = DefaultMaxPending
		}
		if *perNetwork == 0 && *total > 0 {
			*perNetwork = max(*total/DefaultPendingNetworkShare, min(*total, DefaultPendingNetworkFloor))
		}
	}
	if a.RateLimit == nil {
		a.RateLimit = &RateLimit{}
	}
	if !a.RateLimit.Off {
		if a.RateLimit.Requests == 0 {
			a.RateLimit.Requests = DefaultRateLimitRequests
		}
		defaultDuration(&a.RateLimit.Window, DefaultRateLimitWindow)
	}
	repl := caddy.NewReplacer()
	a.PairwiseSecret = repl.ReplaceKnown(a.PairwiseSecret, "")
	for i := range a.PalmAttestors { // an engine's key file: {file./etc/palmgate/engine.pub}
		a.PalmAttestors[i].PublicKey = repl.ReplaceKnown(a.PalmAttestors[i].PublicKey, "")
	}
	for i := range a.Clients {
		a.Clients[i].Secret = repl.ReplaceKnown(a.Clients[i].Secret, "")
		a.Clients[i].SecretHash = repl.ReplaceKnown(a.Clients[i].SecretHash, "")
	}
}

func defaultDuration(d *caddy.Duration, def time.Duration) {
	if *d == 0 {
		*d = caddy.Duration(def)
	}
}

// Validate checks the configuration; each message names the option at fault.
func (a *App) Validate() error {
	if err := validateIssuer(a.Issuer, a.Dev); err != nil {
		return err
	}
	if err := palm.CheckAttestors(a.attestors(), a.Dev); err != nil {
		return err
	}
	if err := a.Storage.validate(); err != nil {
		return err
	}
	if a.PairwiseSecret != "" && len(a.PairwiseSecret) < 32 {
		return errors.New("pairwise_secret: must be at least 32 characters")
	}
	for name, d := range map[string]caddy.Duration{
		"access_token_ttl": a.AccessTokenTTL, "refresh_token_ttl": a.RefreshTokenTTL,
		"auth_code_ttl": a.AuthCodeTTL, "login_ttl": a.LoginTTL, "registration_session_ttl": a.RegistrationSessionTTL,
		"challenge_max_age": a.ChallengeMaxAge,
	} {
		if d < caddy.Duration(time.Second) {
			return fmt.Errorf("%s: must be at least 1s, got %s", name, time.Duration(d))
		}
	}
	if a.SSOSession != 0 && a.SSOSession < caddy.Duration(time.Minute) {
		return fmt.Errorf("sso_session: must be at least 1m, or off, got %s", time.Duration(a.SSOSession))
	}
	if a.MaxPendingLogins < -1 || a.MaxPendingRegistrations < -1 {
		return errors.New("max_pending_logins, max_pending_registrations: must be at least 1, or -1 (off)")
	}
	for _, c := range []struct {
		name              string
		total, perNetwork int
	}{
		{"max_pending_logins", a.MaxPendingLogins, a.MaxPendingLoginsPerNetwork},
		{"max_pending_registrations", a.MaxPendingRegistrations, a.MaxPendingRegistrationsPerNetwork},
	} {
		switch {
		case c.perNetwork < -1:
			return fmt.Errorf("%s per_network: must be at least 1, or -1 (off), got %d", c.name, c.perNetwork)
		case c.perNetwork > 0 && c.total < 0:
			return fmt.Errorf("%s per_network: needs the global cap, which is off", c.name)
		case c.total > 0 && c.perNetwork > c.total:
			return fmt.Errorf("%s per_network: %d is more than the global cap of %d", c.name, c.perNetwork, c.total)
		}
	}
	if !a.RateLimit.Off && (a.RateLimit.Requests < 1 || a.RateLimit.Window < caddy.Duration(time.Second)) {
		return errors.New("rate_limit: needs at least 1 request per window of at least 1s, or `off`")
	}
	if err := a.validatePortal(); err != nil {
		return err
	}
	if err := a.validatePalmAppURL(); err != nil {
		return err
	}
	if err := a.validateBrand(); err != nil {
		return err
	}
	if err := a.validateKeyRotation(); err != nil {
		return err
	}
	if err := a.validateRegistration(); err != nil {
		return err
	}
	if err := validateResources(a.Resources); err != nil {
		return err
	}
	return oidc.CheckClients(a.oidcClients(), a.Dev)
}

// attestors are the configured palm attestors, as core/palm takes them.
func (a *App) attestors() []palm.AttestorConfig {
	list := make([]palm.AttestorConfig, len(a.PalmAttestors))
	for i, pa := range a.PalmAttestors {
		list[i] = palm.AttestorConfig{Name: pa.Name, PublicKey: pa.PublicKey}
	}
	return list
}

// oidcClients are the configured clients, as core/oidc takes them.
func (a *App) oidcClients() []oidc.Client {
	clients := make([]oidc.Client, len(a.Clients))
	for i, c := range a.Clients {
		clients[i] = oidc.Client{ID: c.ID, Secret: c.Secret, SecretHash: c.SecretHash, RedirectURIs: c.RedirectURIs, Name: c.Name, Sector: c.Sector,
			Scopes: c.Scopes, Resources: c.Resources, PostLogoutRedirectURIs: c.PostLogoutRedirectURIs, BackchannelLogoutURI: c.BackchannelLogoutURI,
			IDTokenAlg: c.IDTokenSignedResponseAlg, AccessTokenAudience: c.AccessTokenAudience, Public: c.Public, AllowedOrigins: c.AllowedOrigins}
	}
	return clients
}

func validateIssuer(issuer string, dev bool) error {
	if issuer == "" {
		return errors.New("issuer: required, the public base URL of the service (such as https://id.example.com)")
	}
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("issuer: %q is not an absolute http(s) URL", issuer)
	}
	if u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("issuer: %q must be a base URL with no path, query or user", issuer)
	}
	if u.Scheme == "http" && !dev && !isLoopback(u.Hostname()) {
		return fmt.Errorf("issuer: %q must use https outside dev mode and loopback hosts", issuer)
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Start starts the app's background work: the key watcher re-reads the keys, so
// that a rotation by another instance sharing the store is published and used here
// within keys.ReloadInterval; the key maintenance rotates them on schedule
// (key_rotation) and deletes retired ones (keyrotation.go). Provision starts
// nothing, so that a config that is provisioned and then discarded (a failed
// reload, `caddy validate`) leaves no goroutine behind.
func (a *App) Start() error {
	ctx, cancel := context.WithCancel(a.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { a.keys.Watch(ctx, keys.ReloadInterval) })
	wg.Go(func() { a.keyMaintenance(ctx) })
	a.backchannel.Start()
	a.stopWatch = func() { cancel(); wg.Wait() }
	a.logger.Info("palmgate started", zap.String("version", Version()), zap.String("issuer", a.Issuer))
	a.warnDevExposure()
	storeMetrics().apps.started(a)
	return nil
}

// Stop ends what Start started.
func (a *App) Stop() error {
	storeMetrics().apps.stopped(a)
	if a.stopWatch != nil {
		a.stopWatch()
		a.stopWatch = nil
	}
	if a.backchannel != nil {
		a.backchannel.Close()
	}
	return nil
}

// Cleanup releases the store (closed when no config generation uses it any more).
func (a *App) Cleanup() error {
	if a.backchannel != nil {
		a.backchannel.Close() // a config provisioned, never started
	}
	if a.storeKey == "" {
		return nil
	}
	_, err := stores.Delete(a.storeKey)
	a.storeKey = ""
	return err
}

// clientIP is the client address Caddy determined for the request (honouring the
// server's trusted_proxies).
func clientIP(r *http.Request) string {
	if ip, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string); ok && ip != "" {
		return ip
	}
	return edge.RemoteIP(r)
}

// Interface guards
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.Validator    = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
)
