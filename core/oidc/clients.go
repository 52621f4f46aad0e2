package oidc

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"slices"

	"github.com/palmgate/palmgate/core/keys"
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
	// IDTokenAlg is the algorithm of the client's ID tokens (OIDC Dynamic Client
	// Registration's id_token_signed_response_alg): one of IDTokenAlgs; "" means
	// RS256.
	IDTokenAlg string
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
	// postLogoutRedirectURIs: see Client.PostLogoutRedirectURIs.
	postLogoutRedirectURIs []string
	// idTokenAlg signs its ID tokens (IDTokenAlgs).
	idTokenAlg string
}

// clients holds the registered clients with hashed secrets. They come from the
// config, not the store: with several instances, each holds the clients of its own
// config, so every instance must run the same client blocks (a client known to one
// instance only is unknown to the others).
type clients struct {
	macKey   []byte
	byID     map[string]*client
	dummy    []byte
	verifier *verifier
}

func newClients(list []Client, dev bool) (*clients, error) {
	if err := CheckClients(list, dev); err != nil {
		return nil, err
	}
	c := &clients{macKey: make([]byte, 32), byID: make(map[string]*client, len(list))}
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
			idTokenAlg:             orDefault(cl.IDTokenAlg, keys.RS256),
		}
		switch {
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

func (c *clients) mac(secret string) []byte {
	m := hmac.New(sha256.New, c.macKey)
	m.Write([]byte(secret))
	return m.Sum(nil)
}

// get returns the client with id, or nil.
func (c *clients) get(id string) *client { return c.byID[id] }

// authenticate returns the client when id and secret match, comparing in constant
// time (also when the client is unknown).
// A client configured with a secret_hash is checked against it: SHA-256 in constant
// time, argon2id once per distinct secret (see verifier).
func (c *clients) authenticate(id, secret string) *client {
	cl := c.byID[id]
	if cl != nil && cl.secretHash != nil {
		if !c.verifier.check(id, cl.secretHash, secret) {
			return nil
		}
		return cl
	}
	want := c.dummy
	if cl != nil {
		want = cl.secretMAC
	}
	if subtle.ConstantTimeCompare(c.mac(secret), want) != 1 || cl == nil {
		return nil
	}
	return cl
}

// allowsRedirect reports whether uri is registered for the client (exact match).
func (cl *client) allowsRedirect(uri string) bool {
	return slices.Contains(cl.redirectURIs, uri)
}
