package oidc

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"slices"
	"time"

	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/storage"
)

// Client is a registered relying party.
type Client struct {
	ID     string
	Secret string
	// SecretHash, instead of Secret, is an encoded hash of the secret (see
	// ParseSecretHash), so that the configuration holds nothing in clear.
	SecretHash   string
	RedirectURIs []string
	Name         string
	Sector       string
	// Scopes the client may ask for; empty means DefaultScopes.
	Scopes []string
	// Resources are the RFC 8707 resources (access token audiences) it may ask for.
	Resources []string
	// PostLogoutRedirectURIs are where an RP-initiated logout may send the browser
	// back (exact match).
	PostLogoutRedirectURIs []string
	// BackchannelLogoutURI is where palmgate POSTs a logout token when it ends one
	// of the client's logins (OpenID Connect Back-Channel Logout 1.0; backchannel.go).
	BackchannelLogoutURI string
	// IDTokenAlg is the algorithm of the client's ID tokens (OIDC Dynamic Client
	// Registration's id_token_signed_response_alg): one of IDTokenAlgs; "" means
	// RS256.
	IDTokenAlg string
	// AccessTokenAudience is the aud of its access tokens without a resource: one
	// of AccessTokenAudiences; "" means AudienceBaseURL.
	AccessTokenAudience string
	// Public: a client with no secret (browser and native apps): it authenticates
	// with its client_id only (token_endpoint_auth_method none) and must use PKCE
	// S256 (public.go).
	Public bool
	// AllowedOrigins are the origins (scheme://host[:port]) whose browser pages may
	// call the token, userinfo and revocation endpoints for this client (CORS);
	// a public client's redirect URIs' origins are allowed besides.
	AllowedOrigins []string
}

// IDTokenAlgs are the algorithms a client may have its ID tokens signed with
// (discovery's id_token_signing_alg_values_supported), the default first.
var IDTokenAlgs = []string{keys.RS256, keys.ES256, keys.EdDSA}

// client is a Client as kept in memory: the secret only as a keyed hash, or the
// configured secret hash.
type client struct {
	id           string
	secretMAC    []byte      // of a clear secret
	secretHash   *secretHash // or the configured hash
	redirectURIs []string
	name         string
	sector       string
	scopes       []string
	resources    []string
	// dynamic clients (registry.go): the keyed hashes of the live secrets
	dynamic     bool
	dynamicMACs [][]byte
	// selfRegistered: a dynamic client a developer registered (in the portal),
	// not the operator; the consent screen says so.
	selfRegistered bool
	// notice: the words beside its name on the consent screen when it is
	// self-registered; expiresAt: when a self-registration lapses (zero: never).
	notice    string
	expiresAt time.Time
	// loopbackAnyPort: a loopback IP redirect URI matches with any port (RFC 8252
	// 7.3; loopback.go).
	loopbackAnyPort bool
	// postLogoutRedirectURIs: see Client.PostLogoutRedirectURIs.
	postLogoutRedirectURIs []string
	// backchannelLogoutURI: see Client.BackchannelLogoutURI.
	backchannelLogoutURI string
	// idTokenAlg signs its ID tokens (IDTokenAlgs).
	idTokenAlg string
	// accessTokenAudience: see Client.AccessTokenAudience (never "").
	accessTokenAudience string
	// public: no secret, PKCE required (public.go); origins: its allowed origins
	// for CORS, canonical (originsOf).
	public  bool
	origins []string
	// anonymous: its redirect URIs are an anonymous registrant's (RFC 7591, a
	// metadata document), so its errors are not redirected unseen (RedirectError).
	anonymous bool
	// grantTypes are the grants the token endpoint serves it: a self-registered
	// client's registered ones (RFC 7591 2); nil, every grant (GrantTypes).
	grantTypes []string
	// authMethod is the token_endpoint_auth_method a self-registered
	// confidential client registered, the only one it may authenticate with
	// (RFC 7591 2, as Hydra); "", either (the operator's and the portal's).
	authMethod string
}

// Clients is the client registry: the static clients of the config and the
// dynamic ones in the store (registry.go), their lookup, authentication, creation,
// changes and deletion, and the checks of their names and URIs. It authenticates a
// client and returns it, so that a request reads its client once.
//
// Static clients come from the config, not the store: with several instances, each
// holds the clients of its own config, so every instance must run the same client
// blocks (a client known to one instance only is unknown to the others).
type Clients struct {
	store storage.Store
	now   func() time.Time
	// refreshTTL is the refresh tokens' lifetime: how long a use keeps a
	// self-registered client (touch), on this instance and on an older one.
	refreshTTL time.Duration
	macKey     []byte
	byID       map[string]*client // the static clients
	origins    map[string]bool    // the static clients' allowed origins, all together
	dummy      []byte
	verifier   *verifier
	// dynamic clients (registry.go)
	clientKey    []byte
	devRedirects bool
	maxPerOwner  int
	reg          RegistrationConfig
	metadata     MetadataFetcher
	// deleted runs once a dynamic client's deletion has committed (the provider
	// revokes its grants).
	deleted func(ctx context.Context, id string) error
	events  event.Sink
}

// newClients builds the registry of cfg's clients on cfg's store.
func newClients(ctx context.Context, cfg Config, now func() time.Time) (*Clients, error) {
	list, dev := cfg.Clients, cfg.DevRedirects
	if err := CheckClients(list, dev); err != nil {
		return nil, err
	}
	c := &Clients{store: cfg.Store, now: now, refreshTTL: cmp.Or(cfg.RefreshTTL, DefaultRefreshTTL), devRedirects: dev, maxPerOwner: cfg.MaxClientsPerOwner, events: cfg.Events,
		reg: cfg.Registration, metadata: cfg.ClientMetadata,
		macKey: make([]byte, 32), byID: make(map[string]*client, len(list)), origins: map[string]bool{}}
	if c.maxPerOwner <= 0 {
		c.maxPerOwner = DefaultMaxClientsOwner
	}
	var err error
	if c.clientKey, err = loadClientKey(ctx, cfg.Store); err != nil {
		return nil, err
	}
	_, _ = rand.Read(c.macKey) // crypto/rand never fails on supported platforms
	c.dummy = c.mac("no client has this secret")
	c.verifier = newVerifier(c.macKey)
	for _, cl := range list {
		name := cl.Name
		if name == "" {
			name = cl.ID
		}
		sector := cl.Sector
		if sector == "" {
			sector = cl.ID // the one place of the default
		}
		scopes := cl.Scopes
		if len(scopes) == 0 {
			scopes = DefaultScopes
		}
		entry := &client{
			id: cl.ID, name: name, sector: sector,
			redirectURIs: slices.Clone(cl.RedirectURIs),
			scopes:       slices.Clone(scopes), resources: slices.Clone(cl.Resources),
			postLogoutRedirectURIs: slices.Clone(cl.PostLogoutRedirectURIs),
			backchannelLogoutURI:   cl.BackchannelLogoutURI,
			idTokenAlg:             orDefault(cl.IDTokenAlg, keys.RS256),
			accessTokenAudience:    orDefault(cl.AccessTokenAudience, AudienceBaseURL),
			public:                 cl.Public,
			loopbackAnyPort:        cl.Public, // a native app (loopback.go)
			origins:                originsOf(cl.Public, cl.AllowedOrigins, cl.RedirectURIs),
		}
		for _, o := range entry.origins {
			c.origins[o] = true
		}
		switch {
		case cl.Public:
		case cl.SecretHash != "":
			h, err := parseSecretHash(cl.SecretHash)
			if err != nil {
				return nil, fmt.Errorf("client %s: secret_hash: %w", cl.ID, err)
			}
			entry.secretHash = h
		default:
			entry.secretMAC = c.mac(cl.Secret)
		}
		c.byID[cl.ID] = entry
	}
	return c, nil
}

func (r *Clients) mac(secret string) []byte {
	m := hmac.New(sha256.New, r.macKey)
	m.Write([]byte(secret))
	return m.Sum(nil)
}

// get returns the static client with id, or nil.
func (r *Clients) get(id string) *client { return r.byID[id] }

// authenticateStatic returns the static client when id and secret match,
// comparing in constant time (also when the client is unknown).
// A client configured with a secret_hash is checked against it: SHA-256 in constant
// time, argon2id once per distinct secret (see verifier).
//
// A public client is authenticated by its id alone, and only without a secret.
func (r *Clients) authenticateStatic(id, secret string) *client {
	cl := r.byID[id]
	if cl != nil && cl.public {
		if secret != "" {
			return nil
		}
		return cl
	}
	if cl != nil && cl.secretHash != nil {
		if !r.verifier.check(id, cl.secretHash, secret) {
			return nil
		}
		return cl
	}
	want := r.dummy
	if cl != nil {
		want = cl.secretMAC
	}
	if subtle.ConstantTimeCompare(r.mac(secret), want) != 1 || cl == nil {
		return nil
	}
	return cl
}

// allowsGrant reports whether the client may use the grant_type g at the token
// endpoint: every grant unless it registered its grant_types (selfreg.go).
func (cl *client) allowsGrant(g string) bool {
	return cl.grantTypes == nil || slices.Contains(cl.grantTypes, g)
}

// checkAuthMethod refuses (invalid_client) an authenticated client that used
// another client authentication method than the one it registered (authMethod).
func (cl *client) checkAuthMethod(used string) error {
	if cl.authMethod == "" || cl.authMethod == used {
		return nil
	}
	return oauthError(ErrInvalidClient, "client authentication failed: the client is registered for token_endpoint_auth_method %s, not %s", cl.authMethod, used)
}

// withoutRefresh is scopes without offline_access when the client may not use the
// refresh_token grant: it gets no refresh token, so it is not granted one (as OIDC
// Core 11 ignores offline_access where no code is returned). A request of
// offline_access alone (with a resource: without one, openid is required) is then
// granted no scope, as one of the resource alone is: the token answers scope ""
// (RFC 6749 3.3: a scope other than the one asked is told, not refused), so an
// MCP client still gets its access token for the resource. It kept
// offline_access before, answered without a refresh token (fourth review).
func (cl *client) withoutRefresh(scopes []string) []string {
	if cl.allowsGrant(grantRefreshToken) || !slices.Contains(scopes, ScopeOfflineAccess) {
		return scopes
	}
	return slices.DeleteFunc(slices.Clone(scopes), func(sc string) bool { return sc == ScopeOfflineAccess })
}

// allowsRedirect reports whether uri is registered for the client (exact match;
// for a self-registered client, a loopback IP one with any port: loopback.go).
func (cl *client) allowsRedirect(uri string) bool {
	return slices.Contains(cl.redirectURIs, uri) || cl.allowsLoopbackPort(uri)
}
