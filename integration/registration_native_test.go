package integration

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestDynamicRegistrationNativeScheme (fourth review; RFC 8252 7.1): through the
// real binary, a native MCP client registers itself (RFC 7591) with its
// private-use scheme redirect URI, as Cursor does, and a post-logout URI of its
// scheme; it signs in (the code comes back to cursor://... by a 302), redeems
// the code with PKCE, and logs out: without its id_token_hint the signed-out page
// links on (its URI is an anonymous registrant's), with it the browser goes back.
// A confidential registration of the scheme is refused.
func TestDynamicRegistrationNativeScheme(t *testing.T) {
	t.Parallel()
	e := startOIDC(t, nil, "registration open")
	const callback, bye = "cursor://anysphere.cursor-retrieval/oauth/user-palmgate/callback", "cursor://anysphere.cursor-retrieval/signed-out"
	expectOAuthError(t, e.registerClient(t, map[string]any{"redirect_uris": []string{callback}}), http.StatusBadRequest, "invalid_redirect_uri")
	c := e.registeredClient(t, map[string]any{"client_name": "Cursor", "token_endpoint_auth_method": "none",
		"redirect_uris": []string{callback}, "post_logout_redirect_uris": []string{bye}})
	code, verifier := e.codeFor(t, c, "alice", true)
	m := e.postToken(t, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {callback},
		"client_id": {c.id}, "code_verifier": {verifier}}).ExpectStatus(t, http.StatusOK).Object(t)
	e.userinfo(t, str(m["access_token"])).ExpectStatus(t, http.StatusOK)

	page := e.do(t, "GET", "/oauth2/logout?"+url.Values{"client_id": {c.id}, "post_logout_redirect_uri": {bye}, "state": {"s1"}}.Encode(), nil,
		"Accept", "text/html").ExpectStatus(t, http.StatusOK)
	if body := html.UnescapeString(string(page.Body)); page.Header.Get("Location") != "" ||
		!strings.Contains(body, `href="`+bye+`?state=s1"`) || !strings.Contains(body, "Continue to cursor://anysphere.cursor-retrieval") {
		t.Fatalf("logout without hint: want the signed-out page linking on to %s:\n%s", bye, body)
	}
	resp := e.do(t, "GET", "/oauth2/logout?"+url.Values{"id_token_hint": {str(m["id_token"])}, "post_logout_redirect_uri": {bye}}.Encode(), nil)
	if resp.Status != http.StatusFound || resp.Header.Get("Location") != bye {
		t.Fatalf("logout with the client's hint: %d to %q; want 302 to %s", resp.Status, resp.Header.Get("Location"), bye)
	}
	e.userinfo(t, str(m["access_token"])).ExpectStatus(t, http.StatusUnauthorized)
}
