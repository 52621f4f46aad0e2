package oidc

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/core/records"
	"github.com/palmgate/palmgate/storage"
)

// Dynamic clients live in the store beside the static (configured) ones, which win
// on an id clash and cannot be changed at run time.
//
// Consistency: a dynamic client is read from the store on every use (a point read
// by id, no cache), so a change made on one instance is honoured by every instance
// sharing the store from its next request: no instance can accept a removed redirect
// URI or a secret whose grace period has ended.
//
// Secrets: 256 random bits, stored only as HMAC-SHA256 under a key kept in the store
// (oidc/client-secret-key). A slow password hash (argon2id) protects guessable
// secrets against offline guessing; a 256-bit random secret cannot be guessed, so a
// fast keyed hash loses nothing and keeps every token request cheap. The key means
// a copy of the client records alone does not even allow checking a candidate.

// Limits of dynamic clients.
const (
	MaxClientNameLen       = 100
	MaxRedirectURIs        = 10
	MaxRedirectURILen      = 2000
	MaxSectorLen           = 200
	DefaultMaxClientsOwner = 20
	DefaultSecretGrace     = 24 * time.Hour
	// MaxSecretGrace bounds the grace period of a rotated-out secret.
	MaxSecretGrace    = 30 * 24 * time.Hour
	clientSecretBytes = 32
	clientIDPrefix    = "pg_"
)

// Registry errors, sentinel faults of core's error model (all are the caller's:
// 4xx); clientErr makes an error of one of them that says what is wrong.
var (
	ErrClientNotFound = &fault.Error{Class: fault.NotFound, Code: "client_not_found", Message: "no such client"}
	ErrClientInvalid  = &fault.Error{Class: fault.Invalid, Code: "invalid_client_metadata", Message: "invalid client"}
	ErrClientStatic   = &fault.Error{Class: fault.Conflict, Code: "client_static", Message: "the client is configured statically and cannot be changed at run time"}
	ErrTooManyClients = &fault.Error{Class: fault.Conflict, Code: "too_many_clients", Message: "too many clients"}
)

// clientErr returns an error of kind (one of the registry errors above: its class
// and code, errors.Is matching it) with the formatted message.
func clientErr(kind error, format string, args ...any) error {
	var k *fault.Error
	if !errors.As(kind, &k) {
		k = ErrClientInvalid
	}
	return fault.Of(k, format, args...)
}

// storedSecret is the keyed hash of one secret; ExpiresAt is zero for the current
// secret and the end of the grace period for a rotated-out one.
type storedSecret struct {
	MAC       []byte    `json:"mac"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
}

// clientRecord is a dynamic client as stored.
type clientRecord struct {
	ID           string         `json:"id"`
	Name         string         `json:"name"`
	RedirectURIs []string       `json:"redirectUris"`
	Sector       string         `json:"sector"`
	Owner        string         `json:"owner,omitempty"`
	Secrets      []storedSecret `json:"secrets"`
	CreatedAt    time.Time      `json:"createdAt"`
	UpdatedAt    time.Time      `json:"updatedAt"`
	// PostLogoutRedirectURIs and IDTokenAlg: see Client ("" is RS256).
	PostLogoutRedirectURIs []string `json:"postLogoutRedirectUris,omitempty"`
	IDTokenAlg             string   `json:"idTokenAlg,omitempty"`
	// BackchannelLogoutURI: see Client (backchannel.go).
	BackchannelLogoutURI string `json:"backchannelLogoutUri,omitempty"`
	// AccessTokenAudience: see Client ("" is AudienceBaseURL).
	AccessTokenAudience string `json:"accessTokenAudience,omitempty"`
	// Public and AllowedOrigins: see Client (a public client has no Secrets).
	Public         bool     `json:"public,omitempty"`
	AllowedOrigins []string `json:"allowedOrigins,omitempty"`
	// SelfRegistered: registered through RFC 7591 (selfreg.go), from Network (""
	// when uncounted); it lapses at ExpiresAt (zero: never).
	SelfRegistered bool      `json:"selfRegistered,omitempty"`
	Network        string    `json:"network,omitempty"`
	ExpiresAt      time.Time `json:"expiresAt,omitzero"`
	// GrantTypes are a self-registered client's registered grant_types (RFC
	// 7591 2); none, every grant (the operator's, the portal's, and clients
	// self-registered before they were kept).
	GrantTypes []string `json:"grantTypes,omitempty"`
	// AuthMethod is a self-registered confidential client's registered
	// token_endpoint_auth_method (client_secret_basic or client_secret_post),
	// the only one it may use; "", either (the operator's, the portal's, and
	// clients self-registered before it was kept).
	AuthMethod string `json:"authMethod,omitempty"`
}

// ClientInfo is a client as the admin API and the portal show it (never a secret).
type ClientInfo struct {
	ID           string    `json:"client_id"`
	Name         string    `json:"name"`
	RedirectURIs []string  `json:"redirect_uris"`
	Sector       string    `json:"sector"`
	Owner        string    `json:"owner,omitempty"`
	Static       bool      `json:"static,omitempty"`
	CreatedAt    time.Time `json:"created_at,omitzero"`
	UpdatedAt    time.Time `json:"updated_at,omitzero"`
	// PreviousSecretExpiresAt is when the previous secret stops working, while it
	// still works after a rotation (zero: only the current secret works).
	PreviousSecretExpiresAt time.Time `json:"previous_secret_expires_at,omitzero"`
	// Secrets are the live secrets of a dynamic client (never the secret itself):
	// the current one, which does not expire, then the previous one, if live.
	Secrets []SecretInfo `json:"secrets,omitempty"`
	// PostLogoutRedirectURIs are where RP-initiated logout may send the browser back.
	PostLogoutRedirectURIs []string `json:"post_logout_redirect_uris"`
	// BackchannelLogoutURI is where palmgate POSTs a logout token when it ends one
	// of the client's logins (OpenID Connect Back-Channel Logout 1.0); every
	// token carries sid (backchannel_logout_session_required is always honoured).
	BackchannelLogoutURI string `json:"backchannel_logout_uri,omitempty"`
	// IDTokenAlg signs the client's ID tokens (one of IDTokenAlgs).
	IDTokenAlg string `json:"id_token_signed_response_alg"`
	// AccessTokenAudience is the aud of its access tokens without a resource (one
	// of AccessTokenAudiences).
	AccessTokenAudience string `json:"access_token_audience"`
	// TokenEndpointAuthMethod is `none` for a public client (no secret, PKCE
	// required); a self-registered confidential client's registered one, the only
	// one it may use; `client_secret_basic` otherwise (client_secret_post works too).
	TokenEndpointAuthMethod string `json:"token_endpoint_auth_method"`
	// AllowedOrigins are the origins allowed to call its endpoints from a browser
	// (CORS): the configured ones, and a public client's redirect URIs' origins.
	AllowedOrigins []string `json:"allowed_origins"`
	// SelfRegistered: registered through RFC 7591 (/oauth2/register), lapsing at
	// ExpiresAt unless used (selfreg.go).
	SelfRegistered bool      `json:"self_registered,omitempty"`
	ExpiresAt      time.Time `json:"expires_at,omitzero"`
	// GrantTypes are the grants it registered (RFC 7591); none: every grant.
	GrantTypes []string `json:"grant_types,omitempty"`
}

// SecretInfo is one live secret of a dynamic client: the current one, or the
// previous one with the end of its grace period.
type SecretInfo struct {
	Current   bool      `json:"current"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// ClientSpec is what creating or updating a client sets; a nil field is left as is
// by an update.
type ClientSpec struct {
	Name         *string
	RedirectURIs []string // nil: unchanged
	Sector       *string
	Owner        string // create only
	// PostLogoutRedirectURIs (nil: unchanged; empty: none) and IDTokenAlg (nil:
	// unchanged; "": RS256), as the Caddyfile's options of the same names.
	PostLogoutRedirectURIs []string
	IDTokenAlg             *string
	// BackchannelLogoutURI (nil: unchanged; "": none): see Client. The
	// operator's clients may use http on any host; a developer's or a
	// self-registered one's need https (CheckBackchannelLogoutURI).
	BackchannelLogoutURI *string
	// AccessTokenAudience (nil: unchanged; "": AudienceBaseURL).
	AccessTokenAudience *string
	// Public (create only): a client with no secret, PKCE required (public.go).
	Public bool
	// AllowedOrigins (nil: unchanged; empty: none): origins allowed besides a
	// public client's redirect URIs' (CORS).
	AllowedOrigins []string
}

// info is the record as shown at now: only the secrets live then.
func (r *clientRecord) info(now time.Time) *ClientInfo {
	ci := &ClientInfo{ID: r.ID, Name: r.Name, RedirectURIs: slices.Clone(r.RedirectURIs), Sector: r.Sector, Owner: r.Owner,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		PostLogoutRedirectURIs: orEmpty(r.PostLogoutRedirectURIs), IDTokenAlg: orDefault(r.IDTokenAlg, keys.RS256),
		BackchannelLogoutURI:    r.BackchannelLogoutURI,
		AccessTokenAudience:     orDefault(r.AccessTokenAudience, AudienceBaseURL),
		TokenEndpointAuthMethod: orDefault(r.AuthMethod, authMethod(r.Public)), AllowedOrigins: orEmpty(r.origins()),
		SelfRegistered: r.SelfRegistered, ExpiresAt: r.ExpiresAt, GrantTypes: slices.Clone(r.GrantTypes)}
	for _, s := range r.Secrets {
		switch {
		case s.ExpiresAt.IsZero():
			ci.Secrets = append([]SecretInfo{{Current: true}}, ci.Secrets...)
		case now.Before(s.ExpiresAt):
			ci.Secrets = append(ci.Secrets, SecretInfo{ExpiresAt: s.ExpiresAt})
			if s.ExpiresAt.After(ci.PreviousSecretExpiresAt) {
				ci.PreviousSecretExpiresAt = s.ExpiresAt
			}
		}
	}
	return ci
}

// lookup returns the client with id: a static one, else the dynamic one read from
// the store now; nil when there is none.
func (r *Clients) lookup(ctx context.Context, id string) (*client, error) {
	if cl := r.get(id); cl != nil {
		return cl, nil
	}
	if IsMetadataClientID(id) {
		return r.metadataClient(ctx, id)
	}
	rec, err := r.getRecord(ctx, id)
	if errors.Is(err, ErrClientNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !rec.ExpiresAt.IsZero() && !r.now().Before(rec.ExpiresAt) {
		return nil, nil // a lapsed self-registration, not yet collected
	}
	return r.dynamicClient(rec), nil
}

func (r *Clients) dynamicClient(rec *clientRecord) *client {
	var macs [][]byte
	now := r.now()
	for _, sec := range rec.Secrets {
		if sec.ExpiresAt.IsZero() || now.Before(sec.ExpiresAt) {
			macs = append(macs, sec.MAC)
		}
	}
	name := rec.Name
	if r.checkName(name) != nil {
		name = rec.ID // a name stored before today's rules is not shown (registry_name.go)
	}
	notice := rec.notice()
	return &client{
		id: rec.ID, name: name, sector: rec.Sector, redirectURIs: rec.RedirectURIs, notice: notice, expiresAt: rec.ExpiresAt,
		loopbackAnyPort: rec.SelfRegistered || rec.Public,
		scopes:          DefaultScopes, dynamicMACs: macs, dynamic: true, selfRegistered: notice != "",
		postLogoutRedirectURIs: rec.PostLogoutRedirectURIs, idTokenAlg: orDefault(rec.IDTokenAlg, keys.RS256),
		backchannelLogoutURI: rec.BackchannelLogoutURI,
		accessTokenAudience:  orDefault(rec.AccessTokenAudience, AudienceBaseURL),
		public:               rec.Public, origins: rec.origins(),
		grantTypes: rec.GrantTypes, anonymous: rec.SelfRegistered, authMethod: rec.AuthMethod,
	}
}

func (r *Clients) getRecord(ctx context.Context, id string) (*clientRecord, error) {
	if !validClientID(id) {
		return nil, ErrClientNotFound
	}
	rec, err := records.Read[clientRecord](ctx, r.store, clientKey(id), ErrClientNotFound, "client "+id)
	if err != nil {
		return nil, err
	}
	return rec, restoreSelfRegTermsRead(ctx, r.store, rec)
}

func validClientID(id string) bool {
	rest, ok := strings.CutPrefix(id, clientIDPrefix)
	if !ok || len(rest) != 22 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(rest)
	return err == nil
}

func readClient(txn storage.Txn, id string) (*clientRecord, error) {
	rec, err := records.Get[clientRecord](txn, clientKey(id), ErrClientNotFound, "client "+id)
	if err != nil {
		return nil, err
	}
	return rec, restoreSelfRegTerms(rec, txn.Get)
}

// writeClient writes rec, kept by the store for ttl (0: for ever), and the copy
// of a self-registered client's terms beside it (selfreg_terms.go).
func (r *Clients) writeClient(txn storage.Txn, rec *clientRecord, ttl time.Duration) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := txn.Set(clientKey(rec.ID), b, ttl); err != nil {
		return err
	}
	return putSelfRegTerms(txn, rec, r.termsTTL(ttl))
}

// authenticate returns the client when id and secret match: a static client, then
// a dynamic one (every live secret, in constant time for each), read from the store
// now; nil when they do not match.
func (r *Clients) authenticate(ctx context.Context, id, secret, method string) (*client, error) {
	if r.get(id) != nil {
		return r.authenticateStatic(id, secret), nil
	}
	cl, err := r.lookup(ctx, id)
	if err != nil || cl == nil {
		r.authenticateStatic("", secret) // the same work for an unknown client
		return nil, err
	}
	if cl = r.checkSecret(cl, secret); cl == nil {
		return nil, nil
	}
	if err := cl.checkAuthMethod(method); err != nil {
		return nil, err
	}
	return cl, nil
}

// checkSecret returns the dynamic client cl when secret is one of its live ones.
// A public client matches no secret but the empty one (it has none).
func (r *Clients) checkSecret(cl *client, secret string) *client {
	if cl.public {
		if secret != "" {
			return nil
		}
		return cl
	}
	mac := r.secretMAC(secret)
	ok := 0
	for _, m := range cl.dynamicMACs {
		ok |= subtle.ConstantTimeCompare(mac, m)
	}
	if ok != 1 {
		return nil
	}
	return cl
}

// Get returns a client: a dynamic one, or a static one (Static set).
func (r *Clients) Get(ctx context.Context, id string) (*ClientInfo, error) {
	if cl := r.get(id); cl != nil {
		return cl.info(), nil
	}
	rec, err := r.getRecord(ctx, id)
	if errors.Is(err, ErrClientNotFound) {
		return nil, clientErr(ErrClientNotFound, "no client %.100q", id)
	}
	if err != nil {
		return nil, err
	}
	return rec.info(r.now()), nil
}

func (cl *client) info() *ClientInfo {
	return &ClientInfo{ID: cl.id, Name: cl.name, RedirectURIs: slices.Clone(cl.redirectURIs), Sector: cl.sector, Static: true,
		PostLogoutRedirectURIs: orEmpty(cl.postLogoutRedirectURIs), IDTokenAlg: orDefault(cl.idTokenAlg, keys.RS256),
		BackchannelLogoutURI:    cl.backchannelLogoutURI,
		AccessTokenAudience:     cl.accessTokenAudience,
		TokenEndpointAuthMethod: authMethod(cl.public), AllowedOrigins: orEmpty(cl.origins)}
}

// List returns the static clients then the dynamic ones; with owner set,
// only that owner's dynamic clients.
func (r *Clients) List(ctx context.Context, owner string) ([]*ClientInfo, error) {
	var out []*ClientInfo
	if owner == "" {
		for _, cl := range r.byID {
			out = append(out, cl.info())
		}
		slices.SortFunc(out, func(a, b *ClientInfo) int { return strings.Compare(a.ID, b.ID) })
	}
	var dyn []*ClientInfo
	now := r.now()
	err := r.store.View(ctx, func(txn storage.Txn) error {
		dyn = dyn[:0]
		if owner == "" {
			var recs []*clientRecord
			err := txn.Iterate(clientPrefix(), func(_, v []byte) (bool, error) {
				rec := new(clientRecord)
				if err := json.Unmarshal(v, rec); err != nil {
					return false, err
				}
				recs = append(recs, rec)
				return true, nil
			})
			for _, rec := range recs {
				if err == nil {
					err = restoreSelfRegTerms(rec, txn.Get) // after the iteration: no read inside it
				}
				dyn = append(dyn, rec.info(now))
			}
			return err
		}
		prefix := ownerPrefix(owner)
		return txn.IterateKeys(prefix, func(k []byte) (bool, error) {
			rec, err := readClient(txn, string(k[len(prefix):]))
			if errors.Is(err, ErrClientNotFound) {
				return true, nil
			}
			if err != nil {
				return false, err
			}
			dyn = append(dyn, rec.info(now))
			return true, nil
		})
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(dyn, func(a, b *ClientInfo) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return append(out, dyn...), nil
}
