package oidc

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/palmgate/palmgate/core/event"
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
	// IDTokenAlg signs the client's ID tokens (one of IDTokenAlgs).
	IDTokenAlg string `json:"id_token_signed_response_alg"`
	// AccessTokenAudience is the aud of its access tokens without a resource (one
	// of AccessTokenAudiences).
	AccessTokenAudience string `json:"access_token_audience"`
	// TokenEndpointAuthMethod is `none` for a public client (no secret, PKCE
	// required), `client_secret_basic` otherwise (client_secret_post works too).
	TokenEndpointAuthMethod string `json:"token_endpoint_auth_method"`
	// AllowedOrigins are the origins allowed to call its endpoints from a browser
	// (CORS): the configured ones, and a public client's redirect URIs' origins.
	AllowedOrigins []string `json:"allowed_origins"`
	// SelfRegistered: registered through RFC 7591 (/oauth2/register), lapsing at
	// ExpiresAt unless used (selfreg.go).
	SelfRegistered bool      `json:"self_registered,omitempty"`
	ExpiresAt      time.Time `json:"expires_at,omitzero"`
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
		AccessTokenAudience:     orDefault(r.AccessTokenAudience, AudienceBaseURL),
		TokenEndpointAuthMethod: authMethod(r.Public), AllowedOrigins: orEmpty(r.origins()),
		SelfRegistered: r.SelfRegistered, ExpiresAt: r.ExpiresAt}
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
		loopbackAnyPort: rec.SelfRegistered,
		scopes:          DefaultScopes, dynamicMACs: macs, dynamic: true, selfRegistered: notice != "",
		postLogoutRedirectURIs: rec.PostLogoutRedirectURIs, idTokenAlg: orDefault(rec.IDTokenAlg, keys.RS256),
		accessTokenAudience: orDefault(rec.AccessTokenAudience, AudienceBaseURL),
		public:              rec.Public, origins: rec.origins(),
	}
}

func (r *Clients) getRecord(ctx context.Context, id string) (*clientRecord, error) {
	if !validClientID(id) {
		return nil, ErrClientNotFound
	}
	return records.Read[clientRecord](ctx, r.store, clientKey(id), ErrClientNotFound, "client "+id)
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
	return records.Get[clientRecord](txn, clientKey(id), ErrClientNotFound, "client "+id)
}

// writeClient writes rec, kept by the store for ttl (0: for ever).
func writeClient(txn storage.Txn, rec *clientRecord, ttl time.Duration) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return txn.Set(clientKey(rec.ID), b, ttl)
}

// authenticate returns the client when id and secret match: a static client, then
// a dynamic one (every live secret, in constant time for each), read from the store
// now; nil when they do not match.
func (r *Clients) authenticate(ctx context.Context, id, secret string) (*client, error) {
	if r.get(id) != nil {
		return r.authenticateStatic(id, secret), nil
	}
	cl, err := r.lookup(ctx, id)
	if err != nil || cl == nil {
		r.authenticateStatic("", secret) // the same work for an unknown client
		return nil, err
	}
	return r.checkSecret(cl, secret), nil
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

func newClientSecret() (secret string, err error) { return randomToken(clientSecretBytes) }

// Create registers a dynamic client and returns it with its secret (shown
// once: only its hash is kept). A spec's Owner bounds how many clients that owner
// may have (Config.MaxClientsPerOwner).
func (r *Clients) Create(ctx context.Context, spec ClientSpec) (*ClientInfo, string, error) {
	return r.create(ctx, spec, nil)
}

// create is Create, of a self-registered client (RFC 7591) when sr is set.
func (r *Clients) create(ctx context.Context, spec ClientSpec, sr *selfReg) (*ClientInfo, string, error) {
	if spec.Name == nil || spec.RedirectURIs == nil {
		return nil, "", clientErr(ErrClientInvalid, "name and at least one redirect_uri are required")
	}
	if err := r.validateSpec(&spec); err != nil {
		return nil, "", err
	}
	idBytes := make([]byte, 16)
	if _, err := rand.Read(idBytes); err != nil {
		return nil, "", err
	}
	var secret string
	var secrets []storedSecret
	var err error
	if !spec.Public { // a public client has no secret
		if secret, err = newClientSecret(); err != nil {
			return nil, "", err
		}
		secrets = []storedSecret{{MAC: r.secretMAC(secret)}}
	}
	now := r.now().UTC()
	rec := &clientRecord{
		ID: clientIDPrefix + base64.RawURLEncoding.EncodeToString(idBytes), Name: *spec.Name,
		RedirectURIs: spec.RedirectURIs, Owner: spec.Owner, CreatedAt: now, UpdatedAt: now,
		Secrets:                secrets,
		PostLogoutRedirectURIs: spec.PostLogoutRedirectURIs, IDTokenAlg: keys.RS256,
		Public: spec.Public, AllowedOrigins: spec.AllowedOrigins,
	}
	if spec.IDTokenAlg != nil && *spec.IDTokenAlg != "" {
		rec.IDTokenAlg = *spec.IDTokenAlg
	}
	if spec.AccessTokenAudience != nil && *spec.AccessTokenAudience != AudienceBaseURL {
		rec.AccessTokenAudience = *spec.AccessTokenAudience
	}
	rec.Sector = rec.ID
	if spec.Sector != nil && *spec.Sector != "" {
		rec.Sector = *spec.Sector
	}
	var ttl time.Duration
	if sr != nil {
		rec.SelfRegistered, rec.Network, rec.ExpiresAt = true, sr.network, sr.expiresAt
		ttl = r.recordTTL(rec.ExpiresAt)
	}
	err = r.store.Update(ctx, func(txn storage.Txn) error {
		if err := r.putSelfRegistered(txn, sr, rec, ttl); err != nil {
			return err
		}
		if spec.Owner != "" {
			// Every create of an owner reads and writes one key: concurrent creates
			// conflict (and retry), so they cannot both pass the count below.
			if _, err := txn.Get(ownerMarkKey(spec.Owner)); err != nil && !errors.Is(err, storage.ErrNotFound) {
				return err
			}
			if err := txn.Set(ownerMarkKey(spec.Owner), []byte(rec.ID), 0); err != nil {
				return err
			}
			n := 0
			if err := txn.IterateKeys(ownerPrefix(spec.Owner), func([]byte) (bool, error) { n++; return true, nil }); err != nil {
				return err
			}
			if n >= r.maxPerOwner {
				return clientErr(ErrTooManyClients, "at most %d applications per developer; delete one first", r.maxPerOwner)
			}
			if err := txn.Set(ownerKey(spec.Owner, rec.ID), nil, 0); err != nil {
				return err
			}
		}
		if err := putOrigins(txn, rec.ID, nil, rec.origins(), ttl); err != nil {
			return err
		}
		return writeClient(txn, rec, ttl)
	})
	if err != nil {
		return nil, "", err
	}
	r.emit(ctx, event.ClientCreated, rec.ID, spec.Owner)
	return rec.info(r.now()), secret, nil
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
			return txn.Iterate(clientPrefix(), func(_, v []byte) (bool, error) {
				var rec clientRecord
				if err := json.Unmarshal(v, &rec); err != nil {
					return false, err
				}
				dyn = append(dyn, rec.info(now))
				return true, nil
			})
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

// modify applies fn to a dynamic client; owner, when set, must be its owner
// (another owner's client is ErrClientNotFound, as if it did not exist).
func (r *Clients) modify(ctx context.Context, id, owner string, fn func(*clientRecord) error) (*clientRecord, error) {
	if r.get(id) != nil {
		return nil, clientErr(ErrClientStatic, "client %s is configured statically (Caddyfile) and cannot be changed at run time", id)
	}
	if !validClientID(id) {
		return nil, clientErr(ErrClientNotFound, "no client %.100q", id)
	}
	var rec *clientRecord
	err := r.store.Update(ctx, func(txn storage.Txn) error {
		var err error
		if rec, err = readClient(txn, id); errors.Is(err, ErrClientNotFound) || (err == nil && owner != "" && rec.Owner != owner) {
			return clientErr(ErrClientNotFound, "no client %.100q", id)
		} else if err != nil {
			return err
		}
		old := rec.origins()
		if err := fn(rec); err != nil {
			return err
		}
		ttl := r.recordTTL(rec.ExpiresAt)
		if err := putOrigins(txn, id, old, rec.origins(), ttl); err != nil {
			return err
		}
		rec.UpdatedAt = r.now().UTC()
		return writeClient(txn, rec, ttl)
	})
	return rec, err
}

// Update changes a dynamic client's name, redirect URIs, sector,
// post-logout redirect URIs or ID token algorithm.
func (r *Clients) Update(ctx context.Context, id, owner string, spec ClientSpec) (*ClientInfo, error) {
	if err := r.validateSpec(&spec); err != nil {
		return nil, err
	}
	rec, err := r.modify(ctx, id, owner, func(rec *clientRecord) error {
		if spec.Name != nil {
			rec.Name = *spec.Name
		}
		if spec.RedirectURIs != nil {
			rec.RedirectURIs = spec.RedirectURIs
		}
		if spec.Sector != nil {
			rec.Sector = orDefault(*spec.Sector, rec.ID)
		}
		if spec.PostLogoutRedirectURIs != nil {
			rec.PostLogoutRedirectURIs = spec.PostLogoutRedirectURIs
		}
		if spec.IDTokenAlg != nil {
			rec.IDTokenAlg = orDefault(*spec.IDTokenAlg, keys.RS256)
		}
		if spec.AccessTokenAudience != nil {
			rec.AccessTokenAudience = *spec.AccessTokenAudience
		}
		if spec.AllowedOrigins != nil {
			rec.AllowedOrigins = spec.AllowedOrigins
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.emit(ctx, event.ClientUpdated, id, owner)
	return rec.info(r.now()), nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// RotateSecret gives a dynamic client a new secret (returned once). The
// secret current until now becomes the previous one and keeps working for grace
// (0: stops at once); every older secret stops at once, whatever grace it had left:
// an emergency rotation (grace 0) leaves only the new secret, and a client never
// has more than two live secrets.
func (r *Clients) RotateSecret(ctx context.Context, id, owner string, grace time.Duration) (*ClientInfo, string, error) {
	if grace < 0 || grace > MaxSecretGrace {
		return nil, "", clientErr(ErrClientInvalid, "grace: 0 to %s", MaxSecretGrace)
	}
	secret, err := newClientSecret()
	if err != nil {
		return nil, "", err
	}
	rec, err := r.modify(ctx, id, owner, func(rec *clientRecord) error {
		if rec.Public {
			return clientErr(ErrClientInvalid, "client %s is public: it has no secret to rotate", id)
		}
		now := r.now()
		rec.Secrets = rotatedSecrets(rec.Secrets, r.secretMAC(secret), now, grace)
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	r.emit(ctx, event.ClientSecretRotated, id, owner)
	return rec.info(r.now()), secret, nil
}

// rotatedSecrets are a client's secrets after a rotation at now with grace: the
// new one, current, and the one current before, previous until now+grace if grace
// is positive. Older (previous) secrets are dropped: a rotation ends every older
// secret at the latest grace from now, so keeping the one current before at
// min(its expiry, now+grace), which has none, is the whole rule.
func rotatedSecrets(old []storedSecret, mac []byte, now time.Time, grace time.Duration) []storedSecret {
	kept := []storedSecret{{MAC: mac}}
	if grace <= 0 {
		return kept
	}
	for _, sec := range old {
		if sec.ExpiresAt.IsZero() {
			return append(kept, storedSecret{MAC: sec.MAC, ExpiresAt: now.Add(grace).UTC()})
		}
	}
	return kept
}

// Delete removes a dynamic client and then has the provider revoke every grant
// issued to it (its refresh tokens and access tokens stop working).
func (r *Clients) Delete(ctx context.Context, id, owner string) error {
	if r.get(id) != nil {
		return clientErr(ErrClientStatic, "client %s is configured statically (Caddyfile) and cannot be removed at run time", id)
	}
	if !validClientID(id) {
		return clientErr(ErrClientNotFound, "no client %.100q", id)
	}
	err := r.store.Update(ctx, func(txn storage.Txn) error {
		rec, err := readClient(txn, id)
		if errors.Is(err, ErrClientNotFound) || (err == nil && owner != "" && rec.Owner != owner) {
			return clientErr(ErrClientNotFound, "no client %.100q", id)
		} else if err != nil {
			return err
		}
		if rec.Owner != "" {
			if err := txn.Delete(ownerKey(rec.Owner, id)); err != nil {
				return err
			}
		}
		if rec.SelfRegistered {
			if err := txn.Delete(selfRegKey(rec.Network, id)); err != nil && !errors.Is(err, storage.ErrNotFound) {
				return err
			}
		}
		if err := putOrigins(txn, id, rec.origins(), nil, 0); err != nil {
			return err
		}
		return txn.Delete(clientKey(id))
	})
	if err != nil {
		return err
	}
	r.emit(ctx, event.ClientDeleted, id, owner)
	if r.deleted == nil {
		return nil
	}
	return r.deleted(ctx, id)
}

// emit tells the sink that a dynamic client changed, by its owner (a developer,
// in the portal) or, with none, by the operator.
func (r *Clients) emit(ctx context.Context, kind event.Kind, id, owner string) {
	r.events.Emit(ctx, event.Event{Kind: kind, ClientID: id, HumanID: owner})
}
