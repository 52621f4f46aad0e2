package oidc

import (
	"context"
	"net/url"
	"testing"
)

// TestTokenEndpointRules: the token endpoint's parsing rules, client
// authentication (basic or post, not both) and grant dispatch, in one entry point.
func TestTokenEndpointRules(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	form := func(kv ...string) url.Values {
		v := url.Values{"grant_type": {"authorization_code"}, "code": {"c"}, "redirect_uri": {appRedirect},
			"client_id": {"app"}, "client_secret": {"app-secret"}}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				v.Del(kv[i])
			} else {
				v.Set(kv[i], kv[i+1])
			}
		}
		return v
	}
	twice := form()
	twice.Add("code", "d")
	twoResources := form()
	twoResources["resource"] = []string{apiResource, otherAPIResource}
	for _, tc := range []struct {
		name string
		req  ClientRequest
		code string
	}{
		{"parameter twice", ClientRequest{Params: twice}, ErrInvalidRequest},
		{"resource may repeat (the grant refuses it later)", ClientRequest{Params: twoResources}, ErrInvalidGrant},
		{"basic and post", ClientRequest{Params: form(), Basic: &BasicCredentials{"app", "app-secret"}}, ErrInvalidRequest},
		{"basic, other client_id", ClientRequest{Params: form("client_secret", "", "client_id", "other"), Basic: &BasicCredentials{"app", "app-secret"}}, ErrInvalidRequest},
		{"basic, malformed escape", ClientRequest{Params: form("client_secret", ""), Basic: &BasicCredentials{"app%zz", "app-secret"}}, ErrInvalidClient},
		{"wrong secret", ClientRequest{Params: form("client_secret", "nope")}, ErrInvalidClient},
		{"no client", ClientRequest{Params: form("client_id", "", "client_secret", "")}, ErrInvalidClient},
		{"no grant_type", ClientRequest{Params: form("grant_type", "")}, ErrInvalidRequest},
		{"unknown grant_type", ClientRequest{Params: form("grant_type", "password")}, ErrUnsupportedGrantType},
		{"code grant dispatched", ClientRequest{Params: form()}, ErrInvalidGrant},
		{"basic, code grant dispatched", ClientRequest{Params: form("client_secret", "", "client_id", ""), Basic: &BasicCredentials{"app", "app-secret"}}, ErrInvalidGrant},
		{"refresh grant dispatched", ClientRequest{Params: form("grant_type", "refresh_token", "refresh_token", "x")}, ErrInvalidGrant},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.svc.Token(ctx, tc.req)
			wantError(t, err, tc.code)
		})
	}

	l := h.login(t, params(), "alice")
	resp, err := h.svc.Token(ctx, ClientRequest{Params: url.Values{"grant_type": {"authorization_code"}, "code": {l.code},
		"redirect_uri": {appRedirect}}, Basic: &BasicCredentials{"app", "app-secret"}})
	if err != nil || resp.AccessToken == "" {
		t.Fatalf("Token with a valid code: %v, %+v", err, resp)
	}
}

// TestDiscoveryGrantTypes: discovery names exactly the grants the token endpoint
// dispatches.
func TestDiscoveryGrantTypes(t *testing.T) {
	h := newHarness(t)
	d := h.svc.Discovery()
	if len(d.GrantTypesSupported) != len(grantHandlers) {
		t.Fatalf("discovery grant types %v, handlers %d", d.GrantTypesSupported, len(grantHandlers))
	}
	for _, g := range d.GrantTypesSupported {
		if grantHandlers[g] == nil {
			t.Errorf("discovery names %s, which has no handler", g)
		}
	}
	if d.Issuer != oauthIssuer || d.TokenEndpoint != oauthIssuer+"/token" {
		t.Errorf("discovery %+v", d)
	}
}
