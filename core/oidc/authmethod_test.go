package oidc

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/core/fault"
)

// TestRegisteredAuthMethodEnforced (fourth review, a later pass): a
// self-registered confidential client authenticates with the
// token_endpoint_auth_method it registered only (RFC 7591 2, as Hydra: the
// other is invalid_client), at the token, introspection and revocation
// endpoints; the operator's and the portal's clients keep accepting both.
func TestRegisteredAuthMethodEnforced(t *testing.T) {
	h := newHarness(t)
	h.openRegistration(RegistrationConfig{})
	ctx := context.Background()
	basic := func(id, secret string, form url.Values) ClientRequest {
		return ClientRequest{Params: form, Basic: &BasicCredentials{ID: url.QueryEscape(id), Secret: url.QueryEscape(secret)}}
	}
	post := func(id, secret string, form url.Values) ClientRequest {
		form.Set("client_id", id)
		form.Set("client_secret", secret)
		return ClientRequest{Params: form}
	}
	codeForm := func(id string) url.Values {
		l := h.login(t, regParams(id, regLoopback), "alice")
		return url.Values{"grant_type": {"authorization_code"}, "code": {l.code}, "redirect_uri": {regLoopback}, "code_verifier": {spaVerifier}}
	}
	wantInvalidClient := func(what string, err error) {
		t.Helper()
		if f, ok := fault.As(err); !ok || f.Code != ErrInvalidClient || !strings.Contains(f.Message, "token_endpoint_auth_method") {
			t.Errorf("%s: %v; want invalid_client naming the registered token_endpoint_auth_method", what, err)
		}
	}
	for _, tc := range []struct {
		method    string
		good, bad func(id, secret string, form url.Values) ClientRequest
	}{
		{"client_secret_basic", basic, post},
		{"", basic, post}, // RFC 7591 2's default
		{"client_secret_post", post, basic},
	} {
		out := h.register(t, RegistrationRequest{RedirectURIs: []string{regLoopback}, TokenEndpointAuthMethod: tc.method}, regAddress)
		id, secret := out.ClientID, out.ClientSecret
		_, err := h.svc.Token(ctx, tc.bad(id, secret, codeForm(id)))
		wantInvalidClient(tc.method+": token with the other method", err)
		_, err = h.svc.Authenticate(ctx, tc.bad(id, secret, url.Values{}))
		wantInvalidClient(tc.method+": introspection with the other method", err)
		_, err = h.svc.AuthenticateRevoker(ctx, tc.bad(id, secret, url.Values{}))
		wantInvalidClient(tc.method+": revocation with the other method", err)
		// A request refused before its transaction (no grant_type) too.
		_, err = h.svc.Token(ctx, tc.bad(id, secret, url.Values{}))
		wantInvalidClient(tc.method+": token without grant_type, other method", err)
		if _, err := h.svc.Token(ctx, tc.good(id, secret, codeForm(id))); err != nil {
			t.Errorf("%s: token with the registered method: %v", tc.method, err)
		}
		if _, err := h.svc.Authenticate(ctx, tc.good(id, secret, url.Values{})); err != nil {
			t.Errorf("%s: introspection with the registered method: %v", tc.method, err)
		}
	}
	// The operator's static client and a portal client: both methods.
	name := "Notes app"
	info, secret, err := h.svc.Clients().Create(ctx, ClientSpec{Name: &name, RedirectURIs: []string{"https://notes.example/cb"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ id, secret string }{{info.ID, secret}, {"app", "app-secret"}} {
		for _, mk := range []func(id, secret string, form url.Values) ClientRequest{basic, post} {
			if _, err := h.svc.Authenticate(ctx, mk(c.id, c.secret, url.Values{})); err != nil {
				t.Errorf("%s: %v; want both methods accepted", c.id, err)
			}
		}
	}
}
