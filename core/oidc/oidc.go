// Package oidc is palmgate's OpenID Connect provider: authorization requests that a
// palm scan completes, single-use codes, tokens signed by the store's keys, rotating
// refresh tokens and pairwise subjects. It knows neither HTTP servers nor Caddy: it
// takes parameters and returns values, and refuses with faults of core/fault whose
// codes are OAuth's (oauthError; a RedirectError when the refusal goes back to the
// client). The edge's OAuth dialect maps them to HTTP.
package oidc

import (
	"context"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/storage"
)

// Token types (the JWT `typ` header).
const (
	TypeAccessToken  = "at+jwt" // RFC 9068
	TypeRefreshToken = "rt+jwt"
	TypeIDToken      = "JWT"
)

// Scopes palmgate knows; others are granted as asked, for upstreams to check.
const (
	ScopeOpenID        = "openid"
	ScopeOfflineAccess = "offline_access"
)

// Defaults of the lifetimes a Config leaves zero.
const (
	DefaultAccessTTL  = time.Hour
	DefaultRefreshTTL = 90 * 24 * time.Hour
	DefaultCodeTTL    = 5 * time.Minute
	DefaultLoginTTL   = 10 * time.Minute
)

// Config builds a Service.
type Config struct {
	Store storage.Store
	Palm  *palm.Service
	Keys  *keys.Set
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Issuer is the service's public base URL; the OIDC issuer is Issuer + "/oauth2".
	Issuer         string
	Clients        []Client
	PairwiseSecret string
	AccessTTL      time.Duration
	RefreshTTL     time.Duration
	CodeTTL        time.Duration
	// LoginTTL is how long a person has to complete the palm scan of a login.
	LoginTTL time.Duration
	// DevRedirects lets dynamic clients register http redirect URIs on any host
	// (dev mode); otherwise http only for loopback hosts.
	DevRedirects bool
	// SSOSession is the lifetime of the single sign-on session a palm scan at
	// login starts (session.go); zero means off: every login scans.
	SSOSession time.Duration
	// MaxClientsPerOwner bounds the dynamic clients of one owner (developer).
	// Default: DefaultMaxClientsOwner.
	MaxClientsPerOwner int
	// Registration switches and bounds RFC 7591 registration (selfreg.go).
	Registration RegistrationConfig
	// ClientMetadata fetches client ID metadata documents (metadoc.go); nil: a
	// client_id that is a URL is unknown.
	ClientMetadata MetadataFetcher
	// Agents is the agent registry, for agents acting for their humans
	// (actor.go); nil: no agent gets a token.
	Agents Agents
	// Events receives logins, token grants, reuses, logouts and changes of
	// clients (core/event); nil: none.
	Events event.Sink
	// Resources are the resources a client without a `resources` list may ask
	// tokens for (RFC 8707): those the palmgate_bearer sites protect and the
	// operator's list (issue 23); nil: none.
	Resources *bearer.Resources
	// BackchannelLogout delivers the logout tokens of OpenID Connect Back-Channel
	// Logout (backchannel.go); nil sends none.
	BackchannelLogout LogoutSender
}

// Service is the OpenID Connect provider.
type Service struct {
	store          storage.Store
	palm           *palm.Service
	keys           *keys.Set
	now            func() time.Time
	base           string
	issuer         string
	clients        *Clients
	pairwiseSecret []byte
	accessTTL      time.Duration
	refreshTTL     time.Duration
	codeTTL        time.Duration
	loginTTL       time.Duration
	ssoTTL         time.Duration
	indexSince     time.Time // when SSO sessions were first indexed (endhuman.go)
	refreshParser  *jwt.Parser
	access         *bearer.Verifier
	revocations    *revocations
	events         event.Sink
	resources      *bearer.Resources
	agents         Agents
	logoutSender   LogoutSender
}

// NewService builds the provider and registers its palm challenge outcome.
func NewService(ctx context.Context, cfg Config) (*Service, error) {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	secret, err := loadPairwiseSecret(ctx, cfg.Store, cfg.PairwiseSecret)
	if err != nil {
		return nil, err
	}
	cl, err := newClients(ctx, cfg, now)
	if err != nil {
		return nil, err
	}
	issuer := cfg.Issuer + "/oauth2"
	s := &Service{
		store: cfg.Store, palm: cfg.Palm, keys: cfg.Keys, now: now,
		base: cfg.Issuer, issuer: issuer,
		clients:        cl,
		pairwiseSecret: secret,
		accessTTL:      cfg.AccessTTL, refreshTTL: cfg.RefreshTTL, codeTTL: cfg.CodeTTL, loginTTL: cfg.LoginTTL,
		ssoTTL:        cfg.SSOSession,
		refreshParser: bearer.NewParser(issuer, keys.ES256, now),
		events:        cfg.Events,
		resources:     cfg.Resources,
		agents:        cfg.Agents,
		logoutSender:  cfg.BackchannelLogout,
	}
	cl.deleted = s.clientDeleted
	if s.revocations, err = newRevocations(ctx, cfg.Store, now); err != nil {
		return nil, fmt.Errorf("loading revoked grants: %w", err)
	}
	if s.ssoTTL > 0 {
		if s.indexSince, err = sessionIndexSince(ctx, cfg.Store, now()); err != nil {
			return nil, fmt.Errorf("reading when the SSO sessions were first indexed: %w", err)
		}
	}
	s.access = bearer.NewVerifier(bearer.Config{
		Issuer: issuer, Algorithm: keys.ES256, Keys: cfg.Keys, Revocations: s.revocations, Now: now,
	})
	for _, d := range []struct {
		ttl *time.Duration
		def time.Duration
	}{{&s.accessTTL, DefaultAccessTTL}, {&s.refreshTTL, DefaultRefreshTTL}, {&s.codeTTL, DefaultCodeTTL}, {&s.loginTTL, DefaultLoginTTL}} {
		if *d.ttl == 0 {
			*d.ttl = d.def
		}
	}
	cfg.Palm.Handle(palm.PurposeLogin, outcome{s})
	return s, nil
}

// Clients is the client registry.
func (s *Service) Clients() *Clients { return s.clients }

// Issuer is the OIDC issuer identifier.
func (s *Service) Issuer() string { return s.issuer }

// LoginWindow is the longest an authorization request may take to come back to
// its redirect URI with a code: the person's time for the palm scan (LoginTTL),
// then the code's life (CodeTTL).
func (s *Service) LoginWindow() time.Duration { return s.loginTTL + s.codeTTL }

// AccessTTL is the lifetime of access tokens.
func (s *Service) AccessTTL() time.Duration { return s.accessTTL }
