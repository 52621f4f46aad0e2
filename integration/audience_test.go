package integration

import (
	"net/http"
	"net/url"
	"slices"
	"testing"
)

// TestOIDCScopesAndResources: a client gets only the scopes it is configured for
// (openid offline_access by default), RFC 8707 `resource` sets the access token's
// aud, refreshed tokens keep it, and `palmgate_bearer { audience }` refuses tokens
// of another audience (issue 9, finding 5).
func TestOIDCScopesAndResources(t *testing.T) {
	const ordersAPI = "https://orders.example/api"
	plain := newOIDCClient("plain", "")
	plain.scopes = nil // the default: openid offline_access
	shop := newOIDCClient("shop", "")
	shop.resources = []string{ordersAPI, "urn:example:reports"}
	u := newUpstream(t)
	site := "palmgate\n" + u.route("/orders/*", "scope orders:read", "audience "+ordersAPI) + u.route("/api/*", "scope orders:read")
	e := start(t, oidcOptions([]oidcClient{plain, shop}, site))

	t.Run("scopes a client may not ask for", func(t *testing.T) {
		for _, tc := range []struct {
			c     oidcClient
			scope string
		}{
			{plain, "openid orders:read orders:write admin"},
			{plain, "openid orders:read"},
			{shop, "openid orders:read admin"},
		} {
			expectRedirectedError(t, e.do(t, "GET", e.authURL(tc.c, "scope", tc.scope), nil), tc.c.redirects[0], "invalid_scope")
		}
		e.tokensFor(t, plain, e.subject("ann"), "openid offline_access")
	})

	t.Run("resources a client may not ask for", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			c      oidcClient
			params []string
		}{
			{"unlisted", shop, []string{"resource", "https://evil.example/api"}},
			{"another client's", plain, []string{"resource", ordersAPI}},
			{"relative", shop, []string{"resource", "/api"}},
			{"with a fragment", shop, []string{"resource", ordersAPI + "#x"}},
		} {
			resp := e.do(t, "GET", e.authURL(tc.c, tc.params...), nil)
			expectRedirectedError(t, resp, tc.c.redirects[0], "invalid_target")
		}
		two := e.authURL(shop, "resource", ordersAPI) + "&resource=" + url.QueryEscape("urn:example:reports")
		expectRedirectedError(t, e.do(t, "GET", two, nil), shop.redirects[0], "invalid_target")
	})

	sub := e.subject("bob")
	q := e.login(t, e.authURL(shop, "scope", "openid offline_access orders:read", "resource", ordersAPI), sub, shop.redirects[0])
	code := q.Get("code")
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {shop.redirects[0]},
		"client_id": {shop.id}, "client_secret": {shop.secret}}
	other := withParam(form, "resource", "urn:example:reports")
	expectOAuthError(t, e.postToken(t, other), http.StatusBadRequest, "invalid_target")
	m := e.postToken(t, withParam(form, "resource", ordersAPI)).ExpectStatus(t, http.StatusOK).Object(t)
	withAud := tokenSet{access: str(m["access_token"]), refresh: str(m["refresh_token"]), scope: str(m["scope"]), client: shop.id}
	withAud.sub = str(jwtPart(t, withAud.access, 1)["sub"])
	expectAudience(t, withAud.access, ordersAPI)
	plainTok := e.tokensFor(t, shop, e.subject("cy"), "openid orders:read")
	expectAudience(t, plainTok.access, e.URL)

	t.Run("bearer audience", func(t *testing.T) {
		u.call(t, e, "GET", "/orders/x", "Bearer "+withAud.access).expectAdmitted(t, withAud, "Bearer "+withAud.access)
		u.call(t, e, "GET", "/orders/x", "Bearer "+plainTok.access).expectRefused(t, http.StatusUnauthorized, "palmgate", "invalid_token", "")
		// Without audience, both pass.
		u.call(t, e, "GET", "/api/x", "Bearer "+withAud.access).expectAdmitted(t, withAud, "Bearer "+withAud.access)
		u.call(t, e, "GET", "/api/x", "Bearer "+plainTok.access).expectAdmitted(t, plainTok, "Bearer "+plainTok.access)
	})

	t.Run("refresh keeps the audience", func(t *testing.T) {
		refresh := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {withAud.refresh},
			"client_id": {shop.id}, "client_secret": {shop.secret}}
		expectOAuthError(t, e.postToken(t, withParam(refresh, "resource", "urn:example:reports")), http.StatusBadRequest, "invalid_target")
		expectOAuthError(t, e.postToken(t, withParam(refresh, "scope", "openid admin")), http.StatusBadRequest, "invalid_scope")
		m := e.postToken(t, refresh).ExpectStatus(t, http.StatusOK).Object(t)
		expectAudience(t, str(m["access_token"]), ordersAPI)
		next := withParam(refresh, "refresh_token", str(m["refresh_token"]))
		m = e.postToken(t, withParam(next, "resource", ordersAPI)).ExpectStatus(t, http.StatusOK).Object(t)
		expectAudience(t, str(m["access_token"]), ordersAPI)
	})
}

// TestNarrowedClientAcrossReload: a reload that takes a scope or a resource away
// from a client stops its existing grants from getting them again: a refresh
// token and a code issued before the reload are refused (invalid_scope,
// invalid_target), and work again once the configuration allows them again, so
// the refusals consumed nothing (issue 18, finding 11 a).
func TestNarrowedClientAcrossReload(t *testing.T) {
	t.Parallel()
	const ordersAPI = "https://orders.example/api"
	shop := newOIDCClient("shop", "")
	shop.resources = []string{ordersAPI}
	e := startOIDC(t, []oidcClient{shop})
	asked := e.authURL(shop, "scope", "openid offline_access orders:read", "resource", ordersAPI)
	tok := e.redeem(t, shop, e.login(t, asked, e.subject("ann"), shop.redirects[0]).Get("code"))
	code := e.login(t, asked, e.subject("bo"), shop.redirects[0]).Get("code")
	refresh := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.refresh},
		"client_id": {shop.id}, "client_secret": {shop.secret}}
	exchange := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {shop.redirects[0]},
		"client_id": {shop.id}, "client_secret": {shop.secret}}
	reload := func(c oidcClient) { e.Reload(t, "rate_limit off\n"+c.config()) }

	noScope := shop
	noScope.scopes = []string{"openid", "offline_access", "orders:write"}
	noResource := shop
	noResource.resources = []string{"urn:example:reports"}
	for _, tc := range []struct {
		narrowed oidcClient
		code     string
	}{
		{noScope, "invalid_scope"},
		{noResource, "invalid_target"},
	} {
		reload(tc.narrowed)
		expectOAuthError(t, e.postToken(t, refresh), http.StatusBadRequest, tc.code)
		expectOAuthError(t, e.postToken(t, withParam(refresh, "scope", "openid")), http.StatusBadRequest, tc.code)
		expectOAuthError(t, e.postToken(t, exchange), http.StatusBadRequest, tc.code)
	}

	reload(shop)
	m := e.postToken(t, refresh).ExpectStatus(t, http.StatusOK).Object(t)
	expectAudience(t, str(m["access_token"]), ordersAPI)
	m = e.postToken(t, exchange).ExpectStatus(t, http.StatusOK).Object(t)
	expectAudience(t, str(m["access_token"]), ordersAPI)
}

// expectAudience checks that an access token's aud is exactly [aud].
func expectAudience(t *testing.T, token, aud string) {
	t.Helper()
	c := jwtPart(t, token, 1)
	var got []string
	switch v := c["aud"].(type) {
	case string:
		got = []string{v}
	case []any:
		for _, a := range v {
			got = append(got, str(a))
		}
	}
	if !slices.Equal(got, []string{aud}) {
		t.Errorf("access token aud %v, want [%s]", c["aud"], aud)
	}
}

// withParam is a copy of form with key set to value.
func withParam(form url.Values, key, value string) url.Values {
	c := url.Values{}
	for k, v := range form {
		c[k] = slices.Clone(v)
	}
	c.Set(key, value)
	return c
}
