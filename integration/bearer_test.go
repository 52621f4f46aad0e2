package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
)

// spoofed are identity headers a client may send to impersonate someone.
var spoofed = []string{"X-Palmgate-Sub", "attacker", "X-User-Sub", "attacker", "X-Palmgate-Scope", "orders:write",
	"X-Palmgate-Client-Id", "attacker", "X-User-Scope", "admin", "X-User-Client", "attacker"}

// TestBearerLocal protects routes of a palmgate Caddy with palmgate_bearer in
// local mode: the upstream sees the token's identity, and every bad token is
// refused with its RFC 6750 answer before reaching the upstream. It also
// covers the forward-auth endpoint /oauth2/check.
func TestBearerLocal(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	shop := newOIDCClient("shop", "")
	site := "palmgate\n" + u.route("/api/*", "scope orders:read", "strip_token") + u.route("/raw/*") +
		u.route("/admin/*", "scope orders:read orders:write", "realm shop", "cache_size -1")
	e, twin := startTwins(t, oidcOptions([]oidcClient{shop}, site))
	alice := e.subject("alice")
	full := e.tokensFor(t, shop, alice, "openid orders:read")
	narrow := e.tokensFor(t, shop, alice, "openid")
	both := e.tokensFor(t, shop, e.subject("bob"), "openid offline_access orders:read orders:write")
	if full.sub != narrow.sub || full.sub == both.sub {
		t.Errorf("subs: alice %q and %q, bob %q: want one per person", full.sub, narrow.sub, both.sub)
	}
	// Tokens of another issuer: with the same key, then with its own.
	foreign := twin.tokensFor(t, shop, twin.subject("alice"), "openid orders:read")
	if k1, k2 := jwtPart(t, foreign.access, 0)["kid"], jwtPart(t, full.access, 0)["kid"]; k1 != k2 {
		t.Fatalf("the twin signs with kid %v, want the same key as the server (%v)", k1, k2)
	}
	rotateKeys(t, twin)
	foreignKey := twin.tokensFor(t, shop, twin.subject("alice"), "openid orders:read")
	parts := strings.Split(full.access, ".")

	t.Run("admitted", func(t *testing.T) {
		t.Parallel()
		u.call(t, e, "GET", "/api/orders", "Bearer "+full.access, spoofed...).expectAdmitted(t, full, "")
		u.call(t, e, "POST", "/api/orders", "bearer "+full.access).expectAdmitted(t, full, "")
		u.call(t, e, "GET", "/raw/x", "Bearer "+narrow.access, spoofed...).expectAdmitted(t, narrow, "Bearer "+narrow.access)
		for range 2 { // cache_size -1: every request verifies the signature
			u.call(t, e, "GET", "/admin/x", "Bearer "+both.access, spoofed...).expectAdmitted(t, both, "Bearer "+both.access)
		}
	})

	cases := []struct {
		name, path, authorization string
		status                    int
		realm, code, scope        string
	}{
		{"no Authorization", "/api/x", "", 401, "palmgate", "", ""},
		{"Basic credentials", "/api/x", basicAuth(shop.id, shop.secret), 401, "palmgate", "", ""},
		{"empty Bearer", "/api/x", "Bearer ", 401, "palmgate", "", ""},
		{"not a JWT", "/api/x", "Bearer not-a-token", 401, "palmgate", "invalid_token", ""},
		{"garbage segments", "/api/x", "Bearer a.b.c", 401, "palmgate", "invalid_token", ""},
		{"tampered signature", "/api/x", "Bearer " + tamper(full.access), 401, "palmgate", "invalid_token", ""},
		{"signature of another token", "/api/x", "Bearer " + parts[0] + "." + parts[1] + "." + strings.Split(narrow.access, ".")[2], 401, "palmgate", "invalid_token", ""},
		{"alg none", "/api/x", "Bearer " + strings.Join(strings.Split(withHeader(t, full.access, "alg", "none"), ".")[:2], ".") + ".", 401, "palmgate", "invalid_token", ""},
		{"HS256 keyed with the public key", "/api/x", "Bearer " + hs256Confusion(t, e, full.access), 401, "palmgate", "invalid_token", ""},
		{"typ JWT", "/api/x", "Bearer " + withHeader(t, full.access, "typ", "JWT"), 401, "palmgate", "invalid_token", ""},
		{"ID token", "/api/x", "Bearer " + full.id, 401, "palmgate", "invalid_token", ""},
		{"refresh token", "/api/x", "Bearer " + both.refresh, 401, "palmgate", "invalid_token", ""},
		{"other issuer, same key", "/api/x", "Bearer " + foreign.access, 401, "palmgate", "invalid_token", ""},
		{"other issuer, other key", "/api/x", "Bearer " + foreignKey.access, 401, "palmgate", "invalid_token", ""},
		{"scope not granted", "/api/x", "Bearer " + narrow.access, 403, "palmgate", "insufficient_scope", "orders:read"},
		{"other issuer, no scope required", "/raw/x", "Bearer " + foreign.access, 401, "palmgate", "invalid_token", ""},
		{"realm, no token", "/admin/x", "", 401, "shop", "", ""},
		{"realm, tampered, no cache", "/admin/x", "Bearer " + tamper(both.access), 401, "shop", "invalid_token", ""},
		{"one of two scopes", "/admin/x", "Bearer " + full.access, 403, "shop", "insufficient_scope", "orders:read orders:write"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u.call(t, e, "GET", tc.path, tc.authorization, spoofed...).expectRefused(t, tc.status, tc.realm, tc.code, tc.scope)
		})
	}

	t.Run("check", func(t *testing.T) {
		t.Parallel()
		check := func(method, query, token string) *testserver.Response {
			var h []string
			if token != "" {
				h = []string{"Authorization", "Bearer " + token}
			}
			return e.do(t, method, "/oauth2/check"+query, nil, append(h, spoofed...)...)
		}
		for _, m := range []string{"GET", "POST", "DELETE", "HEAD"} {
			expectChecked(t, check(m, "", narrow.access), narrow)
		}
		expectChecked(t, check("GET", "?scope=orders:read", full.access), full)
		expectChecked(t, check("PUT", "?scope=orders:read+orders:write", both.access), both)
		expectChecked(t, check("GET", "?scope=orders:write&scope=openid", both.access), both)
		expectRefusal(t, check("GET", "?scope=orders:read", ""), 401, "palmgate", "", "")
		expectRefusal(t, check("POST", "", tamper(full.access)), 401, "palmgate", "invalid_token", "")
		expectRefusal(t, check("GET", "", full.id), 401, "palmgate", "invalid_token", "")
		expectRefusal(t, check("GET", "", foreign.access), 401, "palmgate", "invalid_token", "")
		expectRefusal(t, check("GET", "?scope=orders:read", narrow.access), 403, "palmgate", "insufficient_scope", "orders:read")
		expectRefusal(t, check("GET", "?scope=orders:read%20orders:write", full.access), 403, "palmgate", "insufficient_scope", "orders:read orders:write")
	})
}

// TestBearerExpiredToken checks that the issuer's own tokens expire exactly: a
// 10-second access token is admitted before its exp and refused a second past its
// exp (well within the old 30 s leeway) by userinfo,
// introspection, /oauth2/check and a local palmgate_bearer, with and without the
// verified-token cache; a remote palmgate_bearer keeps its leeway (30 s by default,
// `leeway 0` for none).
func TestBearerExpiredToken(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	shop := newOIDCClient("shop", "")
	site := "palmgate\n" + u.route("/api/*", "scope orders:read") + u.route("/nocache/*", "cache_size -1")
	// ttl: long enough for the seven checks before exp on a loaded machine.
	const ttl = 10
	e := start(t, oidcOptions([]oidcClient{shop}, site, fmt.Sprintf("access_token_ttl %ds", ttl)))
	remote := "{\n\tadmin 127.0.0.1:{adminport}\n\tpersist_config off\n}\nhttp://127.0.0.1:{port} {\n" +
		u.route("/lenient/*", "issuer "+e.URL+"/oauth2") + u.route("/exact/*", "issuer "+e.URL+"/oauth2", "leeway 0") + "}\n"
	r := start(t, testserver.Options{Caddyfile: remote})
	tok := e.tokensFor(t, shop, e.subject("alice"), "openid orders:read")
	claims := jwtPart(t, tok.access, 1)
	iat, _ := claims["iat"].(float64)
	exp, _ := claims["exp"].(float64)
	if exp-iat != ttl {
		t.Fatalf("access token iat %v exp %v, want a lifetime of %ds (access_token_ttl %ds)", iat, exp, ttl, ttl)
	}
	bearer := "Bearer " + tok.access
	// Before exp, everywhere (and now cached where there is a cache).
	u.call(t, e, "GET", "/api/a", bearer).expectAdmitted(t, tok, bearer)
	u.call(t, e, "GET", "/nocache/a", bearer).expectAdmitted(t, tok, bearer)
	u.call(t, r, "GET", "/lenient/a", bearer).expectAdmitted(t, tok, bearer)
	u.call(t, r, "GET", "/exact/a", bearer).expectAdmitted(t, tok, bearer)
	expectChecked(t, e.do(t, "GET", "/oauth2/check", nil, "Authorization", bearer), tok)
	e.do(t, "GET", "/oauth2/userinfo", nil, "Authorization", bearer).ExpectStatus(t, http.StatusOK)
	if m := e.introspect(t, shop, tok.access, true).ExpectStatus(t, http.StatusOK).Object(t); m["active"] != true {
		t.Fatalf("introspection before exp: %v, want active", m)
	}
	if time.Now().Unix() >= int64(exp) {
		t.Fatalf("the checks before exp took until %v, past exp %v: the test proves nothing", time.Now(), exp)
	}

	sleepUntil(time.Unix(int64(exp)+1, 0)) // a second past exp
	// First the remote with its leeway, so that its call comes well within the 30 s.
	u.call(t, r, "GET", "/lenient/a", bearer).expectAdmitted(t, tok, bearer) // remote: within its 30 s leeway
	u.call(t, e, "GET", "/api/a", bearer).expectRefused(t, 401, "palmgate", "invalid_token", "")
	u.call(t, e, "GET", "/nocache/a", bearer).expectRefused(t, 401, "palmgate", "invalid_token", "")
	expectRefusal(t, e.do(t, "GET", "/oauth2/check", nil, "Authorization", bearer), 401, "palmgate", "invalid_token", "")
	e.expectRevoked(t, tok.access) // userinfo: invalid_token
	expectInactive(t, e.introspect(t, shop, tok.access, true))
	u.call(t, r, "GET", "/exact/a", bearer).expectRefused(t, 401, "palmgate", "invalid_token", "")
	// A fresh token of the same server is admitted.
	fresh := e.tokensFor(t, shop, e.subject("bob"), "openid orders:read")
	u.call(t, e, "GET", "/nocache/b", "Bearer "+fresh.access).expectAdmitted(t, fresh, "Bearer "+fresh.access)
}

// TestBearerRevokedGrants checks that palmgate_bearer refuses the access tokens
// of a grant revoked by a reused code or by /oauth2/revoke, even when it has
// admitted (and cached) them before, and keeps admitting other grants. It does
// so with the issuer's shared verifier (/api), and with the verifiers a route
// builds for itself with `cache_size`: none (/nocache, -1) and its own (/small,
// 16), which must be given the revocation set too (issue 18, finding 11 b).
func TestBearerRevokedGrants(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	shop := newOIDCClient("shop", "")
	routes := []string{"/api", "/nocache", "/small"}
	e := start(t, oidcOptions([]oidcClient{shop}, "palmgate\n"+u.route("/api/*", "scope orders:read")+
		u.route("/nocache/*", "scope orders:read", "cache_size -1")+u.route("/small/*", "scope orders:read", "cache_size 16")))
	code := e.codeWithScope(t, shop, e.subject("alice"), "openid orders:read")
	reused := e.redeem(t, shop, code)
	revoked := e.tokensFor(t, shop, e.subject("bob"), "openid offline_access orders:read")
	kept := e.tokensFor(t, shop, e.subject("carol"), "openid offline_access orders:read")
	for _, route := range routes {
		for _, tok := range []tokenSet{reused, revoked, kept} {
			u.call(t, e, "GET", route+"/a", "Bearer "+tok.access).expectAdmitted(t, tok, "Bearer "+tok.access)
		}
	}

	expectOAuthError(t, e.postToken(t, url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"redirect_uri": {shop.redirects[0]}, "client_id": {shop.id}, "client_secret": {shop.secret}}), http.StatusBadRequest, "invalid_grant")
	for _, route := range routes {
		u.expectRefusedSoon(t, e, route+"/b", reused)
	}
	expectRefusal(t, e.do(t, "GET", "/oauth2/check", nil, "Authorization", "Bearer "+reused.access), 401, "palmgate", "invalid_token", "")

	expectRevokeOK(t, e.revoke(t, shop, revoked.refresh, true))
	for _, route := range routes {
		u.expectRefusedSoon(t, e, route+"/c", revoked)
	}

	for _, route := range routes {
		u.call(t, e, "GET", route+"/d", "Bearer "+kept.access).expectAdmitted(t, kept, "Bearer "+kept.access)
	}
	expectChecked(t, e.do(t, "GET", "/oauth2/check", nil, "Authorization", "Bearer "+kept.access), kept)
}

// TestBearerHandleErrors: palmgate_bearer returns its refusals to Caddy as HTTP
// errors, so that a site's handle_errors shapes them (here a JSON body with the
// status) while the RFC 6750 challenge set by the middleware stays.
func TestBearerHandleErrors(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	shop := newOIDCClient("shop", "")
	site := "palmgate\n" + u.route("/api/*", "scope orders:read") +
		"handle_errors {\nheader Content-Type application/json\nrespond `{\"shaped\":true,\"status\":{err.status_code}}`\n}\n"
	e := start(t, oidcOptions([]oidcClient{shop}, site))
	narrow := e.tokensFor(t, shop, e.subject("alice"), "openid")
	for _, tc := range []struct {
		name, authorization string
		status              int
		code, scope         string
	}{
		{"no token", "", 401, "", ""},
		{"bad token", "Bearer not-a-token", 401, "invalid_token", ""},
		{"scope not granted", "Bearer " + narrow.access, 403, "insufficient_scope", "orders:read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := u.call(t, e, "GET", "/api/x", tc.authorization)
			if p.seen != nil {
				t.Errorf("%s: the upstream was called for a refused request", p.Request)
			}
			if p.Status != tc.status {
				t.Errorf("%s: status %d, want %d", p.Request, p.Status, tc.status)
			}
			var m map[string]any
			if err := json.Unmarshal(p.Body, &m); err != nil || m["shaped"] != true || m["status"] != float64(tc.status) {
				t.Errorf("%s: body %s, want the handle_errors body with status %d", p.Request, testserver.Snippet(p.Body), tc.status)
			}
			expectChallenge(t, p.Response, tc.status, "palmgate", tc.code, tc.scope)
		})
	}
}
