package integration

import (
	"encoding/base64"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// orderP256 is n, the order of P-256 (SEC 2, section 2.4.2).
var orderP256, _ = new(big.Int).SetString("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551", 16)

// malleate replaces the ES256 signature (r, s) of token by (r, n-s): a second
// string of the same token, which ECDSA verification alone accepts.
func malleate(t *testing.T, token string) string {
	t.Helper()
	i := strings.LastIndexByte(token, '.')
	sig, err := base64.RawURLEncoding.DecodeString(token[i+1:])
	if err != nil || len(sig) != 64 {
		t.Fatalf("not an ES256 signature: %v", err)
	}
	s := new(big.Int).SetBytes(sig[32:])
	new(big.Int).Sub(orderP256, s).FillBytes(sig[32:])
	return token[:i+1] + base64.RawURLEncoding.EncodeToString(sig)
}

// TestMalleatedTokensRefused takes real tokens of the binary and refuses their
// high-s twins at palmgate_bearer (before and after the token is cached),
// userinfo, /oauth2/check, introspection and the token endpoint; the tokens as
// issued keep working.
func TestMalleatedTokensRefused(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	shop := newOIDCClient("shop", "")
	e := start(t, oidcOptions([]oidcClient{shop}, "palmgate\n"+u.route("/api/*", "scope orders:read")))
	tok := e.tokensFor(t, shop, e.subject("alice"), "openid offline_access orders:read")
	twin := malleate(t, tok.access)

	u.call(t, e, "GET", "/api/a", "Bearer "+twin).expectRefused(t, http.StatusUnauthorized, "palmgate", "invalid_token", "")
	u.call(t, e, "GET", "/api/b", "Bearer "+tok.access).expectAdmitted(t, tok, "Bearer "+tok.access)
	u.call(t, e, "GET", "/api/c", "Bearer "+twin).expectRefused(t, http.StatusUnauthorized, "palmgate", "invalid_token", "")
	expectRefusal(t, e.userinfo(t, twin), http.StatusUnauthorized, "palmgate", "invalid_token", "")
	expectRefusal(t, e.do(t, "GET", "/oauth2/check", nil, "Authorization", "Bearer "+twin), http.StatusUnauthorized, "palmgate", "invalid_token", "")
	for _, token := range []string{twin, malleate(t, tok.refresh)} {
		m := e.introspect(t, shop, token, true).ExpectStatus(t, http.StatusOK).Object(t)
		if m["active"] != false {
			t.Errorf("introspection of a malleated token: %v, want active false", m)
		}
	}
	expectOAuthError(t, e.postToken(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {malleate(t, tok.refresh)},
		"client_id": {shop.id}, "client_secret": {shop.secret}}), http.StatusBadRequest, "invalid_grant")

	// Nothing was rotated or revoked by the twins.
	e.expectUserinfo(t, tok.access, tok.sub)
	resp := e.postToken(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.refresh},
		"client_id": {shop.id}, "client_secret": {shop.secret}}).ExpectStatus(t, http.StatusOK).Object(t)
	if str(resp["access_token"]) == "" {
		t.Errorf("refresh with the token as issued: %v", resp)
	}
}
