package oidc

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/storage"
)

// oldTouchedRecord is a self-registered client's record as palmgate 6638b9a
// (2026-11-27, before grant_types and the auth method were kept) rewrites it
// when it issues the client's first token (Clients.touch), captured from
// PostgreSQL during a rolling upgrade (integration TestUpgradeSideBySide): the
// new release's grantTypes and authMethod are gone, the expiry extended.
const oldTouchedRecord = `{"id":"pg_x-aTPrPwIbvby1I62kVqQg","name":"SBS","redirectUris":["https://sbs.example/cb"],` +
	`"sector":"pg_x-aTPrPwIbvby1I62kVqQg","secrets":[{"mac":"nJgUr5dul7PKzoWZFgRBbCre2xtZymUxBT/oplEApos="}],` +
	`"createdAt":"2026-11-27T03:34:36.714947295Z","updatedAt":"2026-11-27T03:34:36.714947295Z","idTokenAlg":"RS256",` +
	`"selfRegistered":true,"expiresAt":"2027-02-25T03:34:36.722005134Z"}`

// TestSelfRegTermsSurviveOldRewrite (upgrade review): an older instance beside
// a new one on one database rewrites a client the new one registered without the
// fields it does not know; the client keeps the grant_types and the
// token_endpoint_auth_method it registered, at every later use of the new
// release, instead of gaining every grant and either method for good.
func TestSelfRegTermsSurviveOldRewrite(t *testing.T) {
	h := newHarness(t)
	h.openRegistration(RegistrationConfig{})
	ctx := context.Background()
	out := h.register(t, RegistrationRequest{RedirectURIs: []string{regLoopback}, TokenEndpointAuthMethod: "client_secret_post"}, regAddress)
	// Rewrite the record as the old release does: its own fields, this client's
	// values, nothing else (the captured record's shape, this client's id, MAC
	// and expiry).
	var captured, now map[string]any
	if err := json.Unmarshal([]byte(oldTouchedRecord), &captured); err != nil {
		t.Fatal(err)
	}
	b, err := storage.ReadKey(ctx, h.store, clientKey(out.ClientID))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &now); err != nil {
		t.Fatal(err)
	}
	old := map[string]any{}
	for k := range captured {
		old[k] = now[k]
	}
	old["expiresAt"] = h.clock.Now().Add(90 * 24 * time.Hour).UTC()
	ob, _ := json.Marshal(old)
	if strings.Contains(string(ob), "grantTypes") || strings.Contains(string(ob), "authMethod") {
		t.Fatalf("the old shape holds a new field: %s", ob)
	}
	if err := h.store.Update(ctx, func(txn storage.Txn) error { return txn.Set(clientKey(out.ClientID), ob, 0) }); err != nil {
		t.Fatal(err)
	}

	p := regParams(out.ClientID, regLoopback)
	p.Set("scope", "openid offline_access")
	l := h.login(t, p, "alice")
	form := url.Values{"grant_type": {"authorization_code"}, "code": {l.code}, "redirect_uri": {regLoopback}, "code_verifier": {spaVerifier}}
	basic := ClientRequest{Params: form, Basic: &BasicCredentials{ID: url.QueryEscape(out.ClientID), Secret: url.QueryEscape(out.ClientSecret)}}
	if _, err := h.svc.Token(ctx, basic); err == nil {
		t.Errorf("a client registered for client_secret_post authenticated with client_secret_basic after an old instance rewrote it")
	}
	form.Set("client_id", out.ClientID)
	form.Set("client_secret", out.ClientSecret)
	resp, err := h.svc.Token(ctx, ClientRequest{Params: form})
	if err != nil {
		t.Fatal(err)
	}
	if resp.RefreshToken != "" {
		t.Errorf("a client registered for authorization_code alone got a refresh token after an old instance rewrote it")
	}
	if ci, err := h.svc.Clients().Get(ctx, out.ClientID); err != nil || strings.Join(ci.GrantTypes, " ") != "authorization_code" || ci.TokenEndpointAuthMethod != "client_secret_post" {
		t.Errorf("the admin view after the rewrite: %+v, %v; want grant_types [authorization_code], client_secret_post", ci, err)
	}
}

// TestSelfRegTermsOutliveAnOldUse: the copy of the terms written at registration
// outlives the client however late in its unused period an older instance uses
// it (which keeps the client refresh_token_ttl from then, an hour more in the
// store, without the copy).
func TestSelfRegTermsOutliveAnOldUse(t *testing.T) {
	h := newHarness(t)
	r := h.svc.clients
	registered := r.recordTTL(h.clock.Now().Add(r.unused())) // as create writes it
	latestOldUse := r.unused() + max(r.refreshTTL, r.unused()) + time.Hour
	if got := r.termsTTL(registered); got <= latestOldUse {
		t.Errorf("terms kept %v, the client up to %v after its registration", got, latestOldUse)
	}
	if r.termsTTL(0) != 0 {
		t.Errorf("the terms of a client kept for ever are not")
	}
}
