package oidc

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"slices"
)

// Client is a registered relying party.
type Client struct {
	ID           string
	Secret       string
	RedirectURIs []string
	Name         string
	Sector       string
	// Scopes the client may ask for; empty means DefaultScopes.
	Scopes []string
	// Resources are the RFC 8707 resources (access token audiences) it may ask for.
	Resources []string
}

// client is a Client as kept in memory: the secret only as a keyed hash.
type client struct {
	id           string
	secretMAC    []byte
	redirectURIs []string
	name         string
	sector       string
	scopes       []string
	resources    []string
}

// clients holds the registered clients with hashed secrets.
type clients struct {
	macKey []byte
	byID   map[string]*client
	dummy  []byte
}

func newClients(list []Client) *clients {
	c := &clients{macKey: make([]byte, 32), byID: make(map[string]*client, len(list))}
	_, _ = rand.Read(c.macKey) // crypto/rand never fails on supported platforms
	c.dummy = c.mac("no client has this secret")
	for _, cl := range list {
		name := cl.Name
		if name == "" {
			name = cl.ID
		}
		sector := cl.Sector
		if sector == "" {
			sector = cl.ID
		}
		scopes := cl.Scopes
		if len(scopes) == 0 {
			scopes = DefaultScopes
		}
		c.byID[cl.ID] = &client{
			id: cl.ID, secretMAC: c.mac(cl.Secret), name: name, sector: sector,
			redirectURIs: slices.Clone(cl.RedirectURIs),
			scopes:       slices.Clone(scopes), resources: slices.Clone(cl.Resources),
		}
	}
	return c
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
func (c *clients) authenticate(id, secret string) *client {
	cl := c.byID[id]
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
