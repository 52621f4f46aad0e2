package oidc

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/palmgate/palmgate/storage"
)

// Records as palmgate 6638b9a (2026-11-27 00:23, the last release before the
// fourth review's record changes) stored them, captured from its backup in the
// integration test TestUpgradeInPlace: what this release reads them as.
const (
	// A consent: scopes, no resources.
	oldConsent = `{"scopes":["offline_access","openid"]}`
	// A public client registered through RFC 7591, used once (touched): no grant
	// types, no auth method.
	oldSelfRegistered = `{"id":"pg_UwcYddkizMLsNW8_L9v_7Q","name":"DCR App","redirectUris":["http://127.0.0.1:9/cb"],` +
		`"sector":"pg_UwcYddkizMLsNW8_L9v_7Q","secrets":null,"createdAt":"2026-11-27T03:41:26.726906626Z",` +
		`"updatedAt":"2026-11-27T03:41:26.726906626Z","idTokenAlg":"RS256","public":true,"selfRegistered":true,` +
		`"expiresAt":"2027-02-25T03:41:26.731751656Z"}`
	// An SSO session (in no index: sessionIndexSince).
	oldSSOSession = `{"humanId":"ed21f0be-f030-4d05-b34e-7e93c2cf572a","authTime":"2026-11-27T03:41:26.74267579Z",` +
		`"expiresAt":"2026-11-27T15:41:26.743339055Z"}`
)

// TestOldConsentNamesNoResource: a consent remembered before it named resources
// covers its scopes without a resource, and asks again for any resource (README,
// Single sign-on session).
func TestOldConsentNamesNoResource(t *testing.T) {
	var c consentRecord
	if err := json.Unmarshal([]byte(oldConsent), &c); err != nil {
		t.Fatal(err)
	}
	if !c.covers([]string{"openid", "offline_access"}, "") {
		t.Errorf("the old consent %s does not cover its own scopes", oldConsent)
	}
	if c.covers([]string{"openid"}, "https://api.example") {
		t.Errorf("the old consent %s covers a resource it never named", oldConsent)
	}
}

// TestOldSelfRegisteredClient: a client self-registered before grant_types and
// the auth method were kept (and with no copy of them beside it, selfreg_terms.go)
// keeps every grant; it is public as it was registered.
func TestOldSelfRegisteredClient(t *testing.T) {
	h := newHarness(t)
	// The capture's day: the record lapses at its expiresAt.
	h.clock.Set(time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC))
	ctx := context.Background()
	const id = "pg_UwcYddkizMLsNW8_L9v_7Q"
	if err := h.store.Update(ctx, func(txn storage.Txn) error { return txn.Set(clientKey(id), []byte(oldSelfRegistered), 0) }); err != nil {
		t.Fatal(err)
	}
	cl, err := h.svc.clients.lookup(ctx, id)
	if err != nil || cl == nil {
		t.Fatalf("lookup of the old record: %v, %v", cl, err)
	}
	for _, g := range GrantTypes {
		if !cl.allowsGrant(g) {
			t.Errorf("the old self-registered client is refused %s; want every grant", g)
		}
	}
	if !cl.public || !cl.anonymous || cl.authMethod != "" {
		t.Errorf("the old self-registered client: public %v anonymous %v authMethod %q; want public, anonymous, no method", cl.public, cl.anonymous, cl.authMethod)
	}
	ci, err := h.svc.Clients().Get(ctx, id)
	if err != nil || ci.GrantTypes != nil || ci.TokenEndpointAuthMethod != TokenAuthMethodNone {
		t.Errorf("the admin view of the old client: %+v, %v; want no grant_types (every grant) and method none", ci, err)
	}
}

// TestOldSSOSessionDecodes: an SSO session of the old release is this one's shape.
func TestOldSSOSessionDecodes(t *testing.T) {
	var s ssoSession
	if err := json.Unmarshal([]byte(oldSSOSession), &s); err != nil || s.HumanID == "" || s.AuthTime.IsZero() || !s.ExpiresAt.After(s.AuthTime) {
		t.Fatalf("the old SSO session %s decodes to %+v, %v", oldSSOSession, s, err)
	}
}
