package oidc

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/storage"
)

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
	if err := checkPrivateUseOwner(spec.Public, spec.RedirectURIs, spec.PostLogoutRedirectURIs); err != nil {
		return nil, "", err
	}
	if spec.BackchannelLogoutURI != nil {
		if err := CheckBackchannelLogoutURI(*spec.BackchannelLogoutURI, spec.Owner == "" && sr == nil); *spec.BackchannelLogoutURI != "" && err != nil {
			return nil, "", err
		}
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
	if spec.BackchannelLogoutURI != nil {
		rec.BackchannelLogoutURI = *spec.BackchannelLogoutURI
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
		rec.SelfRegistered, rec.Network, rec.ExpiresAt, rec.GrantTypes = true, sr.network, sr.expiresAt, sr.grantTypes
		rec.AuthMethod = sr.authMethod
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
		return r.writeClient(txn, rec, ttl)
	})
	if err != nil {
		return nil, "", err
	}
	r.emit(ctx, event.ClientCreated, rec.ID, spec.Owner)
	return rec.info(r.now()), secret, nil
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
			return err // errUnchanged too: nothing is written
		}
		ttl := r.recordTTL(rec.ExpiresAt)
		if err := putOrigins(txn, id, old, rec.origins(), ttl); err != nil {
			return err
		}
		rec.UpdatedAt = r.now().UTC()
		return r.writeClient(txn, rec, ttl)
	})
	return rec, err
}

// errUnchanged ends a modify whose fn found nothing to change: no write.
var errUnchanged = errors.New("client unchanged")

// Update changes a dynamic client's name, redirect URIs, sector,
// post-logout redirect URIs or ID token algorithm. An update that changes
// nothing (no field, or each its current value) is a no-op: nothing is written,
// updated_at stays and no ClientUpdated event is emitted.
func (r *Clients) Update(ctx context.Context, id, owner string, spec ClientSpec) (*ClientInfo, error) {
	if err := r.validateSpec(&spec); err != nil {
		return nil, err
	}
	rec, err := r.modify(ctx, id, owner, func(rec *clientRecord) error {
		before := *rec
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
		if spec.BackchannelLogoutURI != nil && *spec.BackchannelLogoutURI != rec.BackchannelLogoutURI {
			// https for a developer's or a self-registered client (an SSRF surface
			// reached from the internet: backchannel.go).
			if u := *spec.BackchannelLogoutURI; u != "" {
				if err := CheckBackchannelLogoutURI(u, rec.Owner == "" && !rec.SelfRegistered); err != nil {
					return err
				}
			}
			rec.BackchannelLogoutURI = *spec.BackchannelLogoutURI
		}
		if spec.AccessTokenAudience != nil {
			rec.AccessTokenAudience = *spec.AccessTokenAudience
		}
		if spec.AllowedOrigins != nil {
			rec.AllowedOrigins = spec.AllowedOrigins
		}
		if sameClientSettings(&before, rec) {
			return errUnchanged
		}
		return checkPrivateUseOwner(rec.Public, rec.RedirectURIs, rec.PostLogoutRedirectURIs)
	})
	if errors.Is(err, errUnchanged) {
		return rec.info(r.now()), nil
	}
	if err != nil {
		return nil, err
	}
	r.emit(ctx, event.ClientUpdated, id, owner)
	return rec.info(r.now()), nil
}

// sameClientSettings reports whether a and b have the same settings of those
// Update changes (an empty list and none are the same, as are "" and base_url).
func sameClientSettings(a, b *clientRecord) bool {
	return a.Name == b.Name && slices.Equal(a.RedirectURIs, b.RedirectURIs) && a.Sector == b.Sector &&
		slices.Equal(a.PostLogoutRedirectURIs, b.PostLogoutRedirectURIs) && a.IDTokenAlg == b.IDTokenAlg &&
		a.BackchannelLogoutURI == b.BackchannelLogoutURI &&
		orDefault(a.AccessTokenAudience, AudienceBaseURL) == orDefault(b.AccessTokenAudience, AudienceBaseURL) && slices.Equal(a.AllowedOrigins, b.AllowedOrigins)
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
			if err := txn.Delete(selfRegTermsKey(id)); err != nil && !errors.Is(err, storage.ErrNotFound) {
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
	if err := r.deleted(context.WithoutCancel(ctx), id); err != nil {
		return fmt.Errorf("%w: %w", ErrAfterClientDeletion, err)
	}
	return nil
}

// ErrAfterClientDeletion wraps the failure of what follows a client's deletion
// (revoking its grants, forgetting the consents to it): the client is deleted
// (it gets no token, whatever is left), so a caller reports the deletion as done
// and logs the error, as agent removal does (agent.ErrAfterRemoval).
var ErrAfterClientDeletion = errors.New("the client was deleted, but ending its grants and consents failed")

// emit tells the sink that a dynamic client changed, by its owner (a developer,
// in the portal) or, with none, by the operator.
func (r *Clients) emit(ctx context.Context, kind event.Kind, id, owner string) {
	r.events.Emit(ctx, event.Event{Kind: kind, ClientID: id, HumanID: owner})
}
