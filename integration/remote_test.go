package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/internal/testserver"
)

// refetchWait outlasts the resource servers' `refetch_interval 1s`: after it,
// an unknown key id makes them fetch the issuer's keys again.
const refetchWait = 1100 * time.Millisecond

// remoteCaddyfile is a Caddy without palmgate whose /api/* palmgate_bearer
// protects in remote mode against issuer (an OIDC issuer identifier).
func remoteCaddyfile(u *upstream, issuer string, options ...string) string {
	opts := append([]string{"issuer " + issuer, "scope orders:read", "refetch_interval 1s"}, options...)
	return "{\n\tadmin 127.0.0.1:{adminport}\n\tpersist_config off\n}\nhttp://127.0.0.1:{port} {\n" +
		"respond /v1/human/leaderboard \"[]\" 200\n" + u.route("/api/*", opts...) + "}\n"
}

// kidOf is the key id in a JWT's header.
func kidOf(t *testing.T, token string) string {
	t.Helper()
	return str(jwtPart(t, token, 0)["kid"])
}

// forgeAccess makes a well-formed access token of issuer, signed by a key the
// issuer never had, with key id kid.
func forgeAccess(t *testing.T, issuer, kid string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{
		"iss": issuer, "sub": "forged", "aud": issuer, "client_id": "shop", "scope": "openid orders:read",
		"jti": randHex(16), "sid": randHex(16), "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	})
	tok.Header["typ"], tok.Header["kid"] = "at+jwt", kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRemoteBearer runs palmgate_bearer in remote mode in a second Caddy (b)
// against the issuer a: tokens of a are admitted, a key rotation is followed,
// and while a is down the cached keys keep working and an unknown key is 503.
func TestRemoteBearer(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	shop := newOIDCClient("shop", "")
	a := start(t, oidcOptions([]oidcClient{shop}, "palmgate"))
	b := start(t, testserver.Options{Caddyfile: remoteCaddyfile(u, a.URL+"/oauth2")})
	login := func(name, scope string) tokenSet {
		t.Helper()
		return a.tokensFor(t, shop, a.subject(name), scope)
	}
	admitted := func(tok tokenSet) {
		t.Helper()
		u.call(t, b, "GET", "/api/orders", "Bearer "+tok.access, spoofed...).expectAdmitted(t, tok, "Bearer "+tok.access)
	}

	t1 := login("alice", "openid offline_access orders:read")
	narrow := login("alice", "openid")
	admitted(t1)
	for _, tc := range []struct {
		name, authorization string
		status              int
		code, scope         string
	}{
		{"no token", "", 401, "", ""},
		{"not a JWT", "Bearer not-a-token", 401, "invalid_token", ""},
		{"tampered signature", "Bearer " + tamper(t1.access), 401, "invalid_token", ""},
		{"ID token", "Bearer " + t1.id, 401, "invalid_token", ""},
		{"refresh token", "Bearer " + t1.refresh, 401, "invalid_token", ""},
		{"unknown key", "Bearer " + forgeAccess(t, a.URL+"/oauth2", "not-a-key-of-the-issuer"), 401, "invalid_token", ""},
		{"HS256 keyed with the public key", "Bearer " + hs256Confusion(t, a, t1.access), 401, "invalid_token", ""},
		{"scope not granted", "Bearer " + narrow.access, 403, "insufficient_scope", "orders:read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u.call(t, b, "GET", "/api/x", tc.authorization, spoofed...).expectRefused(t, tc.status, "palmgate", tc.code, tc.scope)
		})
	}

	// Rotation: a new kid is fetched on demand; the old key stays published.
	kid1 := kidOf(t, t1.access)
	kid2 := rotateKeys(t, a)
	t2, t2b := login("bob", "openid orders:read"), login("carol", "openid orders:read")
	if kid2 == kid1 || kidOf(t, t2.access) != kid2 || kidOf(t, t2b.access) != kid2 {
		t.Fatalf("after rotation: tokens signed by %q and %q, want the new key %q (old %q)", kidOf(t, t2.access), kidOf(t, t2b.access), kid2, kid1)
	}
	time.Sleep(refetchWait)
	admitted(t2)
	admitted(t1)

	// A third key that b has never seen, then the issuer stops.
	kid3 := rotateKeys(t, a)
	t3 := login("dave", "openid orders:read")
	if kidOf(t, t3.access) != kid3 {
		t.Fatalf("token signed by %q, want %q", kidOf(t, t3.access), kid3)
	}
	a.Stop()
	time.Sleep(refetchWait)
	admitted(t1)
	admitted(t2)
	// Every request: the token may well be valid, b cannot tell.
	for i := range 3 {
		t.Run(fmt.Sprintf("issuer down, unknown key, request %d", i+1), func(t *testing.T) {
			u.call(t, b, "GET", "/api/x", "Bearer "+t3.access).expectRefused(t, http.StatusServiceUnavailable, "palmgate", "", "")
		})
	}
	admitted(t2b) // never seen, but its key stays cached after the failed fetch

	// The issuer is back, on the same port and store.
	a.Restart(t)
	time.Sleep(refetchWait)
	admitted(t3)
	t4 := login("erin", "openid orders:read")
	admitted(t4)
	admitted(t1)
}

// TestRemoteIssuerUnreachable starts a remote-mode palmgate_bearer whose issuer
// is not up yet: tokens needing keys get 503, bad requests still 401; once the
// issuer starts on that port, its tokens are admitted.
func TestRemoteIssuerUnreachable(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	port := testserver.FreePort(t)
	issuer := fmt.Sprintf("http://127.0.0.1:%d/oauth2", port)
	b := start(t, testserver.Options{Caddyfile: remoteCaddyfile(u, issuer, "timeout 2s")})
	forged := forgeAccess(t, issuer, "some-kid")
	for range 2 {
		u.call(t, b, "GET", "/api/x", "Bearer "+forged).expectRefused(t, http.StatusServiceUnavailable, "palmgate", "", "")
	}
	time.Sleep(refetchWait)
	u.call(t, b, "GET", "/api/x", "Bearer "+forged).expectRefused(t, http.StatusServiceUnavailable, "palmgate", "", "")
	u.call(t, b, "GET", "/api/x", "").expectRefused(t, http.StatusUnauthorized, "palmgate", "", "")
	u.call(t, b, "GET", "/api/x", "Bearer not-a-token").expectRefused(t, http.StatusUnauthorized, "palmgate", "invalid_token", "")

	shop := newOIDCClient("shop", "")
	opts := oidcOptions([]oidcClient{shop}, "palmgate")
	opts.Port = port
	a := start(t, opts)
	tok := a.tokensFor(t, shop, a.subject("alice"), "openid orders:read")
	time.Sleep(refetchWait)
	u.call(t, b, "GET", "/api/x", "Bearer "+tok.access).expectAdmitted(t, tok, "Bearer "+tok.access)
	// The issuer answers now: a key it does not have makes the token invalid.
	time.Sleep(refetchWait)
	u.call(t, b, "GET", "/api/x", "Bearer "+forged).expectRefused(t, http.StatusUnauthorized, "palmgate", "invalid_token", "")
}
