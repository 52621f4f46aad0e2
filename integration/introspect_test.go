package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
)

// clientPost posts form to path with c's credentials: client_secret_basic when
// basic is set, else client_secret_post.
func (e *env) clientPost(t *testing.T, path string, c oidcClient, basic bool, form url.Values) *testserver.Response {
	t.Helper()
	h := []string{"Content-Type", "application/x-www-form-urlencoded"}
	if basic {
		h = append(h, "Authorization", basicAuth(c.id, c.secret))
	} else {
		form.Set("client_id", c.id)
		form.Set("client_secret", c.secret)
	}
	return e.do(t, "POST", path, form.Encode(), h...)
}

// introspect asks /oauth2/introspect about token as client c.
func (e *env) introspect(t *testing.T, c oidcClient, token string, basic bool) *testserver.Response {
	t.Helper()
	return e.clientPost(t, "/oauth2/introspect", c, basic, url.Values{"token": {token}})
}

// revoke posts token to /oauth2/revoke as client c.
func (e *env) revoke(t *testing.T, c oidcClient, token string, basic bool) *testserver.Response {
	t.Helper()
	return e.clientPost(t, "/oauth2/revoke", c, basic, url.Values{"token": {token}})
}

// expectInactive checks an introspection answer of exactly {"active":false}.
func expectInactive(t *testing.T, r *testserver.Response) {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Errorf("%s: status %d, want 200 {\"active\":false}\nbody: %s", r.Request, r.Status, testserver.Snippet(r.Body))
		return
	}
	if m := r.Object(t); len(m) != 1 || m["active"] != false {
		t.Errorf("%s: %s, want exactly {\"active\":false}", r.Request, r.Body)
	}
}

// expectRevokeOK checks a revocation answer: 200 with an empty body (RFC 7009 2.2).
func expectRevokeOK(t *testing.T, r *testserver.Response) {
	t.Helper()
	if r.Status != http.StatusOK || len(r.Body) != 0 {
		t.Errorf("%s: %d %q, want 200 with an empty body", r.Request, r.Status, testserver.Snippet(r.Body))
	}
}

// num returns a JSON number as an int64 (-1 if v is none).
func num(v any) int64 {
	switch n := v.(type) {
	case json.Number:
		i, err := n.Int64()
		if err != nil {
			return -1
		}
		return i
	case float64:
		return int64(n)
	}
	return -1
}

// audience normalizes an aud claim (a string or an array) to a list.
func audience(v any) []string {
	switch a := v.(type) {
	case string:
		return []string{a}
	case []any:
		var out []string
		for _, x := range a {
			out = append(out, fmt.Sprint(x))
		}
		return out
	}
	return nil
}

// expectActiveAccess checks the introspection of tok's access token.
func expectActiveAccess(t *testing.T, r *testserver.Response, tok tokenSet, iss string) {
	t.Helper()
	r.ExpectStatus(t, http.StatusOK)
	m, c := r.Object(t), jwtPart(t, tok.access, 1)
	if m["active"] != true || str(m["token_type"]) != "Bearer" || str(m["token_use"]) != "access_token" {
		t.Errorf("%s: %s, want active, token_type Bearer and token_use access_token", r.Request, r.Body)
	}
	if str(m["scope"]) != tok.scope || str(m["client_id"]) != tok.client || str(m["sub"]) != tok.sub || str(m["iss"]) != iss {
		t.Errorf("%s: %s, want scope %q client_id %q sub %q iss %q", r.Request, r.Body, tok.scope, tok.client, tok.sub, iss)
	}
	if num(m["exp"]) != num(c["exp"]) || num(m["iat"]) != num(c["iat"]) || str(m["jti"]) != str(c["jti"]) || str(m["jti"]) == "" {
		t.Errorf("%s: exp %v iat %v jti %v, want the token's %v %v %v", r.Request, m["exp"], m["iat"], m["jti"], c["exp"], c["iat"], c["jti"])
	}
	if got, want := audience(m["aud"]), audience(c["aud"]); len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("%s: aud %v, want the token's %v", r.Request, m["aud"], c["aud"])
	}
}

// expectActiveRefresh checks the introspection of tok's refresh token by its client.
func expectActiveRefresh(t *testing.T, r *testserver.Response, tok tokenSet, iss string) {
	t.Helper()
	r.ExpectStatus(t, http.StatusOK)
	m := r.Object(t)
	if m["active"] != true || str(m["token_use"]) != "refresh_token" || str(m["client_id"]) != tok.client ||
		str(m["sub"]) != tok.sub || str(m["scope"]) != tok.scope || str(m["iss"]) != iss || str(m["jti"]) == "" {
		t.Errorf("%s: %s, want an active refresh_token of client %q for sub %q, scope %q, iss %q", r.Request, r.Body, tok.client, tok.sub, tok.scope, iss)
	}
	if exp := time.Unix(num(m["exp"]), 0); exp.Before(time.Now().Add(defaultAccessTTL)) {
		t.Errorf("%s: exp %v, want the refresh token's far expiry", r.Request, m["exp"])
	}
}

// refresh redeems a refresh token of c at the token endpoint.
func (e *env) refresh(t *testing.T, c oidcClient, refreshToken string) *testserver.Response {
	t.Helper()
	return e.postToken(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refreshToken},
		"client_id": {c.id}, "client_secret": {c.secret}})
}

// TestIntrospection covers token introspection (RFC 7662).
func TestIntrospection(t *testing.T) {
	t.Parallel()
	shop, other := newOIDCClient("shop", ""), newOIDCClient("other", "")
	e := start(t, oidcOptions([]oidcClient{shop, other}, "palmgate"))
	iss := e.URL + "/oauth2"
	disc := e.do(t, "GET", "/oauth2/.well-known/openid-configuration", nil).ExpectStatus(t, http.StatusOK).Object(t)
	if str(disc["introspection_endpoint"]) != iss+"/introspect" || str(disc["revocation_endpoint"]) != iss+"/revoke" {
		t.Errorf("discovery introspection_endpoint %v revocation_endpoint %v, want %s/introspect and %s/revoke",
			disc["introspection_endpoint"], disc["revocation_endpoint"], iss, iss)
	}

	tok := e.tokensFor(t, shop, e.subject("alice"), "openid offline_access orders:read")
	t.Run("active", func(t *testing.T) {
		t.Parallel()
		for _, basic := range []bool{true, false} {
			// Any authenticated client may introspect access tokens.
			expectActiveAccess(t, e.introspect(t, shop, tok.access, basic), tok, iss)
			expectActiveAccess(t, e.introspect(t, other, tok.access, basic), tok, iss)
			// Refresh tokens only by their client.
			expectActiveRefresh(t, e.introspect(t, shop, tok.refresh, basic), tok, iss)
			expectInactive(t, e.introspect(t, other, tok.refresh, basic))
		}
		// token_type_hint is only a hint.
		expectActiveAccess(t, e.clientPost(t, "/oauth2/introspect", shop, true,
			url.Values{"token": {tok.access}, "token_type_hint": {"refresh_token"}}), tok, iss)
		expectActiveRefresh(t, e.clientPost(t, "/oauth2/introspect", shop, false,
			url.Values{"token": {tok.refresh}, "token_type_hint": {"access_token"}}), tok, iss)
	})

	t.Run("inactive", func(t *testing.T) {
		t.Parallel()
		for _, token := range []string{"not-a-token", "a.b.c", tamper(tok.access), tamper(tok.refresh), tok.id,
			withHeader(t, tok.access, "typ", "JWT")} {
			expectInactive(t, e.introspect(t, shop, token, true))
		}
	})

	t.Run("errors", func(t *testing.T) {
		t.Parallel()
		expectOAuthError(t, e.clientPost(t, "/oauth2/introspect", shop, true, url.Values{}), http.StatusBadRequest, "invalid_request")
		expectOAuthError(t, e.introspect(t, shop, "", false), http.StatusBadRequest, "invalid_request")
		wrong := shop
		wrong.secret = "wrong-secret"
		unknown := newOIDCClient("nobody", "")
		for _, basic := range []bool{true, false} {
			expectOAuthError(t, e.introspect(t, wrong, tok.access, basic), http.StatusUnauthorized, "invalid_client")
			expectOAuthError(t, e.introspect(t, unknown, tok.access, basic), http.StatusUnauthorized, "invalid_client")
		}
		expectOAuthError(t, e.do(t, "POST", "/oauth2/introspect", url.Values{"token": {tok.access}}.Encode(),
			"Content-Type", "application/x-www-form-urlencoded"), http.StatusUnauthorized, "invalid_client")
		if r := e.do(t, "GET", "/oauth2/introspect?token="+tok.access, nil, "Authorization", basicAuth(shop.id, shop.secret)); r.Status != http.StatusMethodNotAllowed {
			t.Errorf("%s: status %d, want 405 (POST only)", r.Request, r.Status)
		}
	})

	t.Run("rotated refresh token", func(t *testing.T) {
		t.Parallel()
		rot := e.tokensFor(t, shop, e.subject("bob"), "openid offline_access")
		m := e.refresh(t, shop, rot.refresh).ExpectStatus(t, http.StatusOK).Object(t)
		next := rot
		next.access, next.refresh = str(m["access_token"]), str(m["refresh_token"])
		expectInactive(t, e.introspect(t, shop, rot.refresh, true))
		expectActiveRefresh(t, e.introspect(t, shop, next.refresh, true), next, iss)
		expectActiveAccess(t, e.introspect(t, other, next.access, false), next, iss)
		// Introspecting the rotated token was no reuse: the family still refreshes.
		e.refresh(t, shop, next.refresh).ExpectStatus(t, http.StatusOK)
	})

	t.Run("revoked by a reused code", func(t *testing.T) {
		t.Parallel()
		code := e.codeWithScope(t, shop, e.subject("carol"), "openid offline_access")
		rv := e.redeem(t, shop, code)
		expectActiveAccess(t, e.introspect(t, shop, rv.access, true), rv, iss)
		expectOAuthError(t, e.postToken(t, url.Values{"grant_type": {"authorization_code"}, "code": {code},
			"redirect_uri": {shop.redirects[0]}, "client_id": {shop.id}, "client_secret": {shop.secret}}), http.StatusBadRequest, "invalid_grant")
		expectInactive(t, e.introspect(t, shop, rv.access, true))
		expectInactive(t, e.introspect(t, other, rv.access, false))
		expectInactive(t, e.introspect(t, shop, rv.refresh, true))
		// Other grants are untouched.
		expectActiveAccess(t, e.introspect(t, shop, tok.access, true), tok, iss)
	})
}

// TestRevocation covers token revocation (RFC 7009): a revoked token revokes its
// whole grant, at the token endpoint, userinfo, introspection and palmgate_bearer.
func TestRevocation(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	shop, other := newOIDCClient("shop", ""), newOIDCClient("other", "")
	e := start(t, oidcOptions([]oidcClient{shop, other}, "palmgate\n"+u.route("/api/*", "scope orders:read")))
	const scope = "openid offline_access orders:read"
	byRefresh := e.tokensFor(t, shop, e.subject("alice"), scope)
	byAccess := e.tokensFor(t, shop, e.subject("bob"), scope)
	kept := e.tokensFor(t, shop, e.subject("carol"), scope)
	works := func(tok tokenSet) {
		t.Helper()
		e.expectUserinfo(t, tok.access, tok.sub)
		u.call(t, e, "GET", "/api/x", "Bearer "+tok.access).expectAdmitted(t, tok, "Bearer "+tok.access)
		expectActiveRefresh(t, e.introspect(t, shop, tok.refresh, true), tok, e.URL+"/oauth2")
	}
	revoked := func(tok tokenSet) {
		t.Helper()
		expectOAuthError(t, e.refresh(t, shop, tok.refresh), http.StatusBadRequest, "invalid_grant")
		e.expectRevoked(t, tok.access)
		u.expectRefusedSoon(t, e, "/api/x", tok)
		expectInactive(t, e.introspect(t, shop, tok.access, true))
		expectInactive(t, e.introspect(t, shop, tok.refresh, true))
	}
	for _, tok := range []tokenSet{byRefresh, byAccess, kept} {
		works(tok)
	}

	// Refused revocations revoke nothing.
	expectOAuthError(t, e.revoke(t, other, byRefresh.refresh, true), http.StatusBadRequest, "unauthorized_client")
	expectOAuthError(t, e.revoke(t, other, byRefresh.access, false), http.StatusBadRequest, "unauthorized_client")
	wrong := shop
	wrong.secret = "wrong-secret"
	expectOAuthError(t, e.revoke(t, wrong, byRefresh.refresh, true), http.StatusUnauthorized, "invalid_client")
	expectOAuthError(t, e.revoke(t, wrong, byRefresh.access, false), http.StatusUnauthorized, "invalid_client")
	expectOAuthError(t, e.do(t, "POST", "/oauth2/revoke", url.Values{"token": {byRefresh.refresh}}.Encode(),
		"Content-Type", "application/x-www-form-urlencoded"), http.StatusUnauthorized, "invalid_client")
	expectOAuthError(t, e.clientPost(t, "/oauth2/revoke", shop, true, url.Values{}), http.StatusBadRequest, "invalid_request")
	// Invalid and unknown tokens: 200, and nothing revoked.
	for _, token := range []string{"not-a-token", tamper(byRefresh.refresh), tamper(byRefresh.access), byRefresh.id} {
		expectRevokeOK(t, e.revoke(t, shop, token, false))
	}
	works(byRefresh)

	// The refresh token, with a misleading hint (ignored), revokes the grant.
	expectRevokeOK(t, e.clientPost(t, "/oauth2/revoke", shop, true,
		url.Values{"token": {byRefresh.refresh}, "token_type_hint": {"access_token"}}))
	revoked(byRefresh)
	expectRevokeOK(t, e.revoke(t, shop, byRefresh.refresh, false)) // again: still 200

	// The access token revokes the grant's refresh token too.
	expectRevokeOK(t, e.revoke(t, shop, byAccess.access, false))
	revoked(byAccess)

	works(kept)
	e.refresh(t, shop, kept.refresh).ExpectStatus(t, http.StatusOK)
}
