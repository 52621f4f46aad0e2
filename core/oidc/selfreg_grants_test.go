package oidc

import (
	"context"
	"strings"
	"testing"
)

// TestRegisteredGrantTypesEnforced: a self-registered client gets only the
// grants it registered (RFC 7591 2), as Hydra decides: one registered for
// authorization_code alone gets no refresh token (offline_access is dropped from
// what it is granted) and the token endpoint refuses it refresh_token and
// jwt-bearer with unauthorized_client; one registered with refresh_token
// refreshes.
func TestRegisteredGrantTypesEnforced(t *testing.T) {
	h := newHarness(t)
	h.openRegistration(RegistrationConfig{})
	codeOnly := h.register(t, RegistrationRequest{RedirectURIs: []string{regLoopback}, TokenEndpointAuthMethod: "none"}, regAddress)
	if strings.Join(codeOnly.GrantTypes, " ") != "authorization_code" {
		t.Fatalf("grant_types answered = %v; want the default, authorization_code", codeOnly.GrantTypes)
	}
	if ci, err := h.svc.Clients().Get(context.Background(), codeOnly.ClientID); err != nil || strings.Join(ci.GrantTypes, " ") != "authorization_code" {
		t.Fatalf("the admin view = %+v, %v; want grant_types [authorization_code]", ci, err)
	}
	p := regParams(codeOnly.ClientID, regLoopback)
	p.Set("scope", "openid offline_access")
	l := h.login(t, p, "alice")
	resp, err := h.token("grant_type", "authorization_code", "client_id", codeOnly.ClientID, "code", l.code,
		"redirect_uri", regLoopback, "code_verifier", spaVerifier)
	if err != nil {
		t.Fatal(err)
	}
	if resp.RefreshToken != "" || resp.Scope != "openid" {
		t.Fatalf("a client registered for authorization_code alone got scope %q and a refresh token %v; want openid and none",
			resp.Scope, resp.RefreshToken != "")
	}
	for _, grant := range []string{"refresh_token", GrantTypeJWTBearer} {
		_, err := h.token("grant_type", grant, "client_id", codeOnly.ClientID, "refresh_token", "x", "assertion", "x")
		if oe := wantError(t, err, ErrUnauthorizedClient); !strings.Contains(oe.Description, grant) {
			t.Errorf("%s: error_description %q does not name the grant", grant, oe.Description)
		}
	}

	// requested_actor asks for an agent grant that only the jwt-bearer grant
	// uses: refused back to the client, nothing recorded.
	p = regParams(codeOnly.ClientID, regLoopback)
	p.Set(RequestedActorParam, "alice-bot")
	_, err = h.svc.Authorize(context.Background(), p, testBrowser)
	if oe := wantError(t, err, ErrUnauthorizedClient); oe.RedirectURI != regLoopback {
		t.Fatalf("requested_actor of a client without jwt-bearer: %+v; want unauthorized_client back to the client", oe)
	}

	both := h.register(t, RegistrationRequest{RedirectURIs: []string{regLoopback}, TokenEndpointAuthMethod: "none",
		GrantTypes: []string{"authorization_code", "refresh_token"}}, regAddress)
	p = regParams(both.ClientID, regLoopback)
	p.Set("scope", "openid offline_access")
	l = h.login(t, p, "alice")
	resp, err = h.token("grant_type", "authorization_code", "client_id", both.ClientID, "code", l.code,
		"redirect_uri", regLoopback, "code_verifier", spaVerifier)
	if err != nil || resp.RefreshToken == "" {
		t.Fatalf("a client registered with refresh_token: %+v, %v; want a refresh token", resp, err)
	}
	if _, err := h.token("grant_type", "refresh_token", "client_id", both.ClientID, "refresh_token", resp.RefreshToken); err != nil {
		t.Fatalf("refresh of a client registered with refresh_token: %v", err)
	}
	_, err = h.token("grant_type", GrantTypeJWTBearer, "client_id", both.ClientID, "assertion", "x")
	wantError(t, err, ErrUnauthorizedClient)
}

// TestMetadataDocumentGrantTypes: a client ID metadata document that lists its
// grant_types gets those only; one that lists none keeps every grant.
func TestMetadataDocumentGrantTypes(t *testing.T) {
	h := newHarness(t)
	const listed, unlisted = "https://a.example.test/code-only", "https://a.example.test/unlisted"
	h.svc.clients.metadata = &fakeDocs{docs: map[string]string{
		listed:   `{"client_id":"` + listed + `","redirect_uris":["` + regLoopback + `"],"grant_types":["authorization_code"]}`,
		unlisted: `{"client_id":"` + unlisted + `","redirect_uris":["` + regLoopback + `"]}`,
	}}
	for _, tc := range []struct {
		id      string
		refresh bool
	}{{listed, false}, {unlisted, true}} {
		p := regParams(tc.id, regLoopback)
		p.Set("scope", "openid offline_access")
		l := h.login(t, p, "alice")
		resp, err := h.token("grant_type", "authorization_code", "client_id", tc.id, "code", l.code,
			"redirect_uri", regLoopback, "code_verifier", spaVerifier)
		if err != nil || (resp.RefreshToken != "") != tc.refresh {
			t.Fatalf("%s: %+v, %v; want a refresh token: %v", tc.id, resp, err, tc.refresh)
		}
		if !tc.refresh {
			_, err := h.token("grant_type", "refresh_token", "client_id", tc.id, "refresh_token", "x")
			wantError(t, err, ErrUnauthorizedClient)
		}
	}
}

// TestRegisterJWTBearerGrant: a client may register the agents' jwt-bearer grant
// beside authorization_code (the consent comes through the authorization
// request), and then asks for an agent with requested_actor; the token endpoint
// serves it that grant (refused here for the assertion or the harness's
// missing agent registry, not for the client).
func TestRegisterJWTBearerGrant(t *testing.T) {
	h := newHarness(t)
	h.openRegistration(RegistrationConfig{})
	out := h.register(t, RegistrationRequest{RedirectURIs: []string{regLoopback}, TokenEndpointAuthMethod: "none",
		GrantTypes: []string{"authorization_code", GrantTypeJWTBearer}}, regAddress)
	if strings.Join(out.GrantTypes, " ") != "authorization_code "+GrantTypeJWTBearer {
		t.Fatalf("grant_types answered = %v", out.GrantTypes)
	}
	p := regParams(out.ClientID, regLoopback)
	p.Set(RequestedActorParam, "alice-bot")
	h.authorize(t, p)
	_, err := h.token("grant_type", GrantTypeJWTBearer, "client_id", out.ClientID, "assertion", "x")
	if oe, ok := asOAuthErr(err); !ok || oe.Code == ErrUnauthorizedClient {
		t.Fatalf("jwt-bearer of a client registered for it = %v; want a refusal of the assertion, not of the client", err)
	}
	_, err = h.token("grant_type", "refresh_token", "client_id", out.ClientID, "refresh_token", "x")
	wantError(t, err, ErrUnauthorizedClient)
	if _, err := h.svc.Register(context.Background(), RegistrationRequest{RedirectURIs: []string{regLoopback},
		GrantTypes: []string{GrantTypeJWTBearer}}, regAddress); err == nil {
		t.Fatal("a registration without authorization_code was accepted")
	}
}
