package integration

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
)

// logoutPage expects the logout endpoint's HTML page with status and text in it,
// its strict CSP and no redirect.
func logoutPage(t *testing.T, resp *testserver.Response, status int, text string) {
	t.Helper()
	if resp.Status != status || !strings.Contains(string(resp.Body), text) {
		t.Errorf("%s: status %d, want %d with %q\nbody: %s", resp.Request, resp.Status, status, text, testserver.Snippet(resp.Body))
	}
	if loc := resp.Header.Get("Location"); loc != "" {
		t.Errorf("%s: Location %q, want no redirect", resp.Request, loc)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("%s: Content-Type %q, want text/html", resp.Request, ct)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'none'") || strings.Contains(csp, "unsafe") {
		t.Errorf("%s: Content-Security-Policy %q, want default-src 'none' and nothing unsafe", resp.Request, csp)
	}
}

// TestOIDCLogout covers RP-initiated logout (OpenID Connect RP-Initiated Logout
// 1.0) at /oauth2/logout: the login named by id_token_hint ends (its refresh
// token and its access tokens stop working), the browser goes to the registered
// post_logout_redirect_uri with state, and every refusal is a 400 page (OAuth JSON
// to a program).
func TestOIDCLogout(t *testing.T) {
	t.Parallel()
	shop, other := newOIDCClient("shop", ""), newOIDCClient("other", "")
	shop.postLogout = []string{"https://shop.example/logged-out", "https://shop.example/bye?lang=fr"}
	e := startOIDC(t, []oidcClient{shop, other})
	iss := e.URL + "/oauth2"

	t.Run("discovery", func(t *testing.T) {
		t.Parallel()
		d := e.do(t, "GET", "/oauth2/.well-known/openid-configuration", nil).ExpectStatus(t, http.StatusOK).Object(t)
		if str(d["end_session_endpoint"]) != iss+"/logout" {
			t.Errorf("end_session_endpoint %v, want %s/logout", d["end_session_endpoint"], iss)
		}
		for key, want := range map[string]bool{
			"request_parameter_supported": false, "request_uri_parameter_supported": false,
			"authorization_response_iss_parameter_supported": true,
		} {
			if got, ok := d[key].(bool); !ok || got != want {
				t.Errorf("discovery %s = %v, want %v", key, d[key], want)
			}
		}
	})

	t.Run("redirect with state revokes the login", func(t *testing.T) {
		t.Parallel()
		tok := e.tokensFor(t, shop, e.subject("alice"), "openid offline_access")
		kept := e.tokensFor(t, shop, e.subject("alice"), "openid offline_access") // another login
		e.expectUserinfo(t, tok.access, tok.sub)
		q := url.Values{"id_token_hint": {tok.id}, "post_logout_redirect_uri": {shop.postLogout[1]}, "state": {"s 1/2"}}
		resp := e.do(t, "GET", "/oauth2/logout?"+q.Encode(), nil)
		if want := "https://shop.example/bye?lang=fr&state=s+1%2F2"; resp.Status != http.StatusFound || resp.Header.Get("Location") != want {
			t.Fatalf("%s: %d Location %q, want 302 to %s", resp.Request, resp.Status, resp.Header.Get("Location"), want)
		}
		e.expectRevoked(t, tok.access)
		expectOAuthError(t, e.refresh(t, shop, tok.refresh), http.StatusBadRequest, "invalid_grant")
		e.expectUserinfo(t, kept.access, kept.sub)
		e.refresh(t, shop, kept.refresh).ExpectStatus(t, http.StatusOK)
	})

	t.Run("POST without redirect shows the signed-out page", func(t *testing.T) {
		t.Parallel()
		tok := e.tokensFor(t, shop, e.subject("bob"), "openid offline_access")
		form := url.Values{"id_token_hint": {tok.id}, "client_id": {shop.id}}.Encode()
		resp := e.do(t, "POST", "/oauth2/logout", form, "Content-Type", "application/x-www-form-urlencoded")
		logoutPage(t, resp, http.StatusOK, "You are signed out")
		e.expectRevoked(t, tok.access)
		expectOAuthError(t, e.refresh(t, shop, tok.refresh), http.StatusBadRequest, "invalid_grant")
	})

	t.Run("without hint nothing is revoked", func(t *testing.T) {
		t.Parallel()
		tok := e.tokensFor(t, shop, e.subject("carol"), "openid offline_access")
		logoutPage(t, e.do(t, "GET", "/oauth2/logout", nil), http.StatusOK, "You are signed out")
		resp := e.do(t, "GET", "/oauth2/logout?client_id=shop&state=x&post_logout_redirect_uri="+url.QueryEscape(shop.postLogout[0]), nil)
		if resp.Status != http.StatusFound || resp.Header.Get("Location") != shop.postLogout[0]+"?state=x" {
			t.Errorf("%s: %d Location %q, want 302 to %s?state=x", resp.Request, resp.Status, resp.Header.Get("Location"), shop.postLogout[0])
		}
		e.expectUserinfo(t, tok.access, tok.sub)
	})

	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		tok := e.tokensFor(t, shop, e.subject("dave"), "openid offline_access")
		otherTok := e.tokensFor(t, other, e.subject("dave"), "openid offline_access")
		// An ID token of another palmgate: another issuer, other keys.
		elsewhere := startOIDC(t, []oidcClient{shop})
		foreign := elsewhere.tokensFor(t, shop, elsewhere.subject("dave"), "openid offline_access")
		parts := strings.Split(tok.id, ".")
		parts[2] = strings.Repeat("A", len(parts[2])) // the same claims, a forged signature
		forged := strings.Join(parts, ".")
		cases := []struct {
			name string
			q    url.Values
		}{
			{"unregistered post_logout_redirect_uri", url.Values{"id_token_hint": {tok.id}, "post_logout_redirect_uri": {"https://evil.example/"}}},
			{"a redirect_uri is no post_logout_redirect_uri", url.Values{"id_token_hint": {tok.id}, "post_logout_redirect_uri": {shop.redirects[0]}}},
			{"another client's hint with this client's URI", url.Values{"id_token_hint": {otherTok.id}, "post_logout_redirect_uri": {shop.postLogout[0]}}},
			{"client_id is not the hint's audience", url.Values{"id_token_hint": {tok.id}, "client_id": {other.id}}},
			{"forged signature", url.Values{"id_token_hint": {forged}}},
			{"hint of another issuer", url.Values{"id_token_hint": {foreign.id}}},
			{"access token as hint", url.Values{"id_token_hint": {tok.access}}},
			{"unknown client", url.Values{"client_id": {"nobody"}, "post_logout_redirect_uri": {shop.postLogout[0]}}},
		}
		for _, tc := range cases {
			resp := e.do(t, "GET", "/oauth2/logout?"+tc.q.Encode(), nil, "Accept", browserAccept)
			logoutPage(t, resp, http.StatusBadRequest, "Sign-out refused")
			// A program gets the same refusal as OAuth JSON.
			resp = e.do(t, "GET", "/oauth2/logout?"+tc.q.Encode(), nil, "Accept", "application/json")
			if resp.Status != http.StatusBadRequest || resp.Header.Get("Location") != "" || !strings.Contains(string(resp.Body), `"error":"invalid_request"`) {
				t.Errorf("%s (%s): status %d, Location %q, body %s; want 400 invalid_request JSON", resp.Request, tc.name, resp.Status, resp.Header.Get("Location"), testserver.Snippet(resp.Body))
			}
		}
		// Nothing was revoked by the refusals.
		e.expectUserinfo(t, tok.access, tok.sub)
		e.expectUserinfo(t, otherTok.access, otherTok.sub)
		elsewhere.expectUserinfo(t, foreign.access, foreign.sub) // at its own issuer
	})

	t.Run("HEAD changes nothing", func(t *testing.T) {
		t.Parallel()
		tok := e.tokensFor(t, shop, e.subject("frank"), "openid offline_access")
		resp := e.do(t, "HEAD", "/oauth2/logout?"+url.Values{"id_token_hint": {tok.id}}.Encode(), nil)
		if resp.Status != http.StatusOK {
			t.Errorf("%s: status %d, want 200", resp.Request, resp.Status)
		}
		e.expectUserinfo(t, tok.access, tok.sub)
	})

	t.Run("PUT is 405", func(t *testing.T) {
		t.Parallel()
		if resp := e.do(t, "PUT", "/oauth2/logout", nil); resp.Status != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, POST" {
			t.Errorf("%s: %d Allow %q, want 405 with Allow GET, POST", resp.Request, resp.Status, resp.Header.Get("Allow"))
		}
	})
}

// TestOIDCLogoutExpiredHint: an ID token past its exp still names the login to end
// (RP-Initiated Logout 1.0 section 2: the OP accepts an expired id_token_hint).
func TestOIDCLogoutExpiredHint(t *testing.T) {
	t.Parallel()
	shop := newOIDCClient("shop", "")
	e := startOIDC(t, []oidcClient{shop}, "access_token_ttl 1s")
	tok := e.tokensFor(t, shop, e.subject("erin"), "openid offline_access")
	exp, _ := jwtPart(t, tok.id, 1)["exp"].(float64)
	time.Sleep(time.Until(time.Unix(int64(exp), 0).Add(1100 * time.Millisecond)))
	resp := e.do(t, "GET", "/oauth2/logout?"+url.Values{"id_token_hint": {tok.id}}.Encode(), nil)
	logoutPage(t, resp, http.StatusOK, "The application&#39;s sign-in has ended")
	expectOAuthError(t, e.refresh(t, shop, tok.refresh), http.StatusBadRequest, "invalid_grant")
}
