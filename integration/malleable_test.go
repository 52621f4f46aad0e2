package integration

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/palmgate/palmgate/internal/jwttest"
)

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
	twin := jwttest.Malleate(t, tok.access)

	u.call(t, e, "GET", "/api/a", "Bearer "+twin).expectRefused(t, http.StatusUnauthorized, "palmgate", "invalid_token", "")
	u.call(t, e, "GET", "/api/b", "Bearer "+tok.access).expectAdmitted(t, tok, "Bearer "+tok.access)
	u.call(t, e, "GET", "/api/c", "Bearer "+twin).expectRefused(t, http.StatusUnauthorized, "palmgate", "invalid_token", "")
	expectRefusal(t, e.userinfo(t, twin), http.StatusUnauthorized, "palmgate", "invalid_token", "")
	expectRefusal(t, e.do(t, "GET", "/oauth2/check", nil, "Authorization", "Bearer "+twin), http.StatusUnauthorized, "palmgate", "invalid_token", "")
	for _, token := range []string{twin, jwttest.Malleate(t, tok.refresh)} {
		m := e.introspect(t, shop, token, true).ExpectStatus(t, http.StatusOK).Object(t)
		if m["active"] != false {
			t.Errorf("introspection of a malleated token: %v, want active false", m)
		}
	}
	expectOAuthError(t, e.postToken(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {jwttest.Malleate(t, tok.refresh)},
		"client_id": {shop.id}, "client_secret": {shop.secret}}), http.StatusBadRequest, "invalid_grant")

	// Nothing was rotated or revoked by the twins.
	e.expectUserinfo(t, tok.access, tok.sub)
	resp := e.postToken(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.refresh},
		"client_id": {shop.id}, "client_secret": {shop.secret}}).ExpectStatus(t, http.StatusOK).Object(t)
	if str(resp["access_token"]) == "" {
		t.Errorf("refresh with the token as issued: %v", resp)
	}
}
