package integration

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/internal/testserver"
)

// TestStockScopeDefaults: a client configured with the default scopes gets the
// stock defaults of Auth.js and oauth2-proxy (openid profile email, and address
// and phone) granted without claims but a pseudonymous preferred_username under
// profile, in the ID token and at userinfo; the token response says the granted
// scope; an API scope it lacks is still invalid_scope; a refresh narrowed without
// openid answers an access token and a rotated refresh token, no ID token
// (issue 21, items 1 and 3).
func TestStockScopeDefaults(t *testing.T) {
	t.Parallel()
	plain := newOIDCClient("plain", "")
	plain.scopes = nil // the default: openid offline_access
	other := newOIDCClient("other", "")
	e := startOIDC(t, []oidcClient{plain, other})

	disc := e.do(t, "GET", "/oauth2/.well-known/openid-configuration", nil).ExpectStatus(t, http.StatusOK).Object(t)
	for _, sc := range []string{"openid", "offline_access", "profile", "email", "address", "phone"} {
		if !containsAny(disc["scopes_supported"], sc) {
			t.Errorf("discovery scopes_supported %v lacks %s", disc["scopes_supported"], sc)
		}
	}
	if !containsAny(disc["claims_supported"], "preferred_username") {
		t.Errorf("discovery claims_supported %v lacks preferred_username", disc["claims_supported"])
	}

	for _, tc := range []struct {
		asked, granted string
		username       bool
	}{
		{"openid profile email", "email openid profile", true},
		{"openid email profile offline_access address phone", "address email offline_access openid phone profile", true},
		{"openid email", "email openid", false},
	} {
		t.Run("asked "+tc.asked, func(t *testing.T) {
			ts := e.redeem(t, plain, e.codeWithScope(t, plain, e.subject("stock-user"), tc.asked))
			if ts.scope != tc.granted {
				t.Errorf("token response scope %q, want %q", ts.scope, tc.granted)
			}
			id := jwtPart(t, ts.id, 1)
			info := e.userinfo(t, ts.access).ExpectStatus(t, http.StatusOK).Object(t)
			for _, k := range []string{"email", "email_verified", "address", "phone_number", "name"} {
				if _, ok := id[k]; ok {
					t.Errorf("the ID token has claim %s: %v", k, id)
				}
				if _, ok := info[k]; ok {
					t.Errorf("userinfo has claim %s: %v", k, info)
				}
			}
			name := str(id["preferred_username"])
			if !tc.username {
				if name != "" || len(info) != 1 {
					t.Errorf("without profile: ID token preferred_username %q, userinfo %v; want none and only sub", name, info)
				}
				return
			}
			if !strings.HasPrefix(name, "user-") || strings.Contains(ts.sub, strings.TrimPrefix(name, "user-")) {
				t.Errorf("preferred_username %q: want user- and a hash, not a piece of the sub %q", name, ts.sub)
			}
			if str(info["preferred_username"]) != name || str(info["sub"]) != ts.sub || len(info) != 2 {
				t.Errorf("userinfo %v, want sub %s and preferred_username %s", info, ts.sub, name)
			}
		})
	}

	t.Run("the name differs per application", func(t *testing.T) {
		who := e.subject("two-apps")
		a := jwtPart(t, e.tokensFor(t, plain, who, "openid profile").id, 1)
		b := jwtPart(t, e.tokensFor(t, other, who, "openid profile").id, 1)
		if str(a["preferred_username"]) == "" || a["preferred_username"] == b["preferred_username"] {
			t.Errorf("one person's preferred_username in two applications: %v and %v", a["preferred_username"], b["preferred_username"])
		}
	})

	t.Run("an API scope the client lacks is still invalid_scope", func(t *testing.T) {
		for _, scope := range []string{"openid profile email orders:read", "openid admin"} {
			expectRedirectedError(t, e.do(t, "GET", e.authURL(plain, "scope", scope), nil), plain.redirects[0], "invalid_scope")
		}
	})

	t.Run("a refresh narrowed without openid", func(t *testing.T) {
		ts := e.tokensFor(t, plain, e.subject("narrow"), "openid offline_access profile")
		refresh := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {ts.refresh},
			"client_id": {plain.id}, "client_secret": {plain.secret}}
		expectOAuthError(t, e.postToken(t, withParam(refresh, "scope", "offline_access email")), http.StatusBadRequest, "invalid_scope")
		m := e.postToken(t, withParam(refresh, "scope", "offline_access profile")).ExpectStatus(t, http.StatusOK).Object(t)
		if _, ok := m["id_token"]; ok {
			t.Errorf("a refresh without openid returned an id_token: %v", m)
		}
		if str(m["scope"]) != "offline_access profile" || str(m["access_token"]) == "" || str(m["refresh_token"]) == "" || m["refresh_token"] == ts.refresh {
			t.Errorf("narrowed refresh answered %v: want scope offline_access profile, an access token and a new refresh token", m)
		}
		if got := str(jwtPart(t, str(m["access_token"]), 1)["scope"]); got != "offline_access profile" {
			t.Errorf("narrowed access token scope %q", got)
		}
		// Userinfo is OpenID Connect's: an access token without openid is refused.
		expectBearerChallenge(t, e.userinfo(t, str(m["access_token"])), "insufficient_scope")
		// The grant keeps its scopes: the next refresh gets openid and an ID token.
		m = e.postToken(t, withParam(refresh, "refresh_token", str(m["refresh_token"]))).ExpectStatus(t, http.StatusOK).Object(t)
		if str(m["id_token"]) == "" || str(m["scope"]) != "offline_access openid profile" {
			t.Errorf("refresh after the narrowed one: %v, want an id_token and the granted scopes", m)
		}
	})
}

// containsAny reports whether v, a JSON array, holds s.
func containsAny(v any, s string) bool {
	list, _ := v.([]any)
	return slices.ContainsFunc(list, func(x any) bool { return x == s })
}

// TestAccessTokenAudienceChoices: access_token_audience sets the aud of a
// client's access tokens without a resource (base_url by default, client_id, or
// both), in the Caddyfile and through the admin API; a resource is the aud
// alone; palmgate's userinfo and palmgate_bearer take each (issue 21, item 2).
func TestAccessTokenAudienceChoices(t *testing.T) {
	t.Parallel()
	const ordersAPI = "https://orders.example/api"
	base := newOIDCClient("aud-base", "")
	byID := newOIDCClient("aud-id", "")
	byID.accessAud = "client_id"
	byID.resources = []string{ordersAPI}
	both := newOIDCClient("aud-both", "")
	both.accessAud = "both"
	u := newUpstream(t)
	site := "palmgate\n" + u.route("/api/*", "scope openid") + u.route("/orders/*", "scope openid", "audience "+ordersAPI)
	e := start(t, oidcOptions([]oidcClient{base, byID, both}, site))

	expectAud := func(t *testing.T, token string, want ...string) {
		t.Helper()
		var got []string
		switch v := jwtPart(t, token, 1)["aud"].(type) {
		case string:
			got = []string{v}
		case []any:
			for _, a := range v {
				got = append(got, str(a))
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("access token aud %v, want %v", got, want)
		}
	}
	for _, tc := range []struct {
		c    oidcClient
		want []string
	}{
		{base, []string{e.URL}},
		{byID, []string{"aud-id"}},
		{both, []string{e.URL, "aud-both"}},
	} {
		t.Run(tc.c.id, func(t *testing.T) {
			ts := e.tokensFor(t, tc.c, e.subject("aud-user"), "openid offline_access")
			expectAud(t, ts.access, tc.want...)
			e.expectUserinfo(t, ts.access, ts.sub)
			m := e.postToken(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {ts.refresh},
				"client_id": {tc.c.id}, "client_secret": {tc.c.secret}}).ExpectStatus(t, http.StatusOK).Object(t)
			expectAud(t, str(m["access_token"]), tc.want...)
		})
	}
	t.Run("a resource is the aud alone", func(t *testing.T) {
		q := e.login(t, e.authURL(byID, "resource", ordersAPI), e.subject("aud-res"), byID.redirects[0])
		ts := e.redeem(t, byID, q.Get("code"))
		expectAud(t, ts.access, ordersAPI)
		u.call(t, e, "GET", "/orders/x", "Bearer "+ts.access).expectAdmitted(t, ts, "Bearer "+ts.access)
	})
	t.Run("palmgate_bearer without audience takes a client_id aud; with one, refuses it", func(t *testing.T) {
		ts := e.tokensFor(t, byID, e.subject("aud-bearer"), "openid")
		u.call(t, e, "GET", "/api/x", "Bearer "+ts.access).expectAdmitted(t, ts, "Bearer "+ts.access)
		u.call(t, e, "GET", "/orders/x", "Bearer "+ts.access).expectRefused(t, http.StatusUnauthorized, "palmgate", "invalid_token", "")
	})
	t.Run("admin API", func(t *testing.T) {
		admin := "http://" + e.AdminAddr + "/palmgate/clients"
		origin := []string{"Origin", "http://" + e.AdminAddr}
		redirect := "https://gateway-app.example/callback"
		bad := testserver.Do(t, "POST", admin, map[string]any{"name": "x", "redirect_uris": []string{redirect}, "access_token_audience": "issuer"}, origin...)
		if bad.Status != http.StatusBadRequest || !strings.Contains(string(bad.Body), "access_token_audience") {
			t.Errorf("create with access_token_audience issuer: %d %s, want 400 naming the field", bad.Status, bad.Body)
		}
		resp := testserver.Do(t, "POST", admin, map[string]any{"name": "Gateway App", "redirect_uris": []string{redirect}, "access_token_audience": "client_id"}, origin...)
		if resp.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", resp.Status, resp.Body)
		}
		m := resp.Object(t)
		if str(m["access_token_audience"]) != "client_id" {
			t.Errorf("created client %v: want access_token_audience client_id", m)
		}
		c := oidcClient{id: str(m["client_id"]), secret: str(m["client_secret"]), redirects: []string{redirect}}
		ts := e.tokensFor(t, c, e.subject("admin-aud"), "openid")
		expectAud(t, ts.access, c.id)
		patched := testserver.Do(t, "PATCH", admin+"/"+c.id, map[string]any{"access_token_audience": "both"}, origin...)
		if patched.Status != http.StatusOK || str(patched.Object(t)["access_token_audience"]) != "both" {
			t.Fatalf("PATCH access_token_audience both: %d %s", patched.Status, patched.Body)
		}
		expectAud(t, e.tokensFor(t, c, e.subject("admin-aud"), "openid").access, e.URL, c.id)

		// The CLI's --access-token-audience, and what show prints.
		e.cli(t, "update", c.id, "--access-token-audience", "base_url")
		if out := e.cli(t, "show", c.id); !strings.Contains(out, "access_token_audience") || !strings.Contains(out, "base_url") {
			t.Errorf("client show after --access-token-audience base_url:\n%s", out)
		}
		expectAud(t, e.tokensFor(t, c, e.subject("admin-aud"), "openid").access, e.URL)
		if out, err := e.cliErr(t, "update", c.id, "--access-token-audience", "issuer"); err == nil {
			t.Errorf("client update --access-token-audience issuer succeeded:\n%s", out)
		}
	})
}
