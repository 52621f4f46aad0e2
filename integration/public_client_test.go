package integration

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/internal/testserver"
)

// Public clients and CORS (issue 21, items 4 and 6) against the real binary.

const (
	spaAllowed = "http://127.0.0.1:5173" // the SPA's allowed_origins
	spaDenied  = "https://evil.example"
)

func newPublicClient(id string) oidcClient {
	c := newOIDCClient(id, "")
	c.public, c.secret, c.origins = true, "", []string{spaAllowed}
	return c
}

// expectCORS checks an answer's Access-Control-Allow-Origin: origin, or no CORS
// header at all when origin is "".
func expectCORS(t *testing.T, resp *testserver.Response, origin string) {
	t.Helper()
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != origin {
		t.Errorf("%s: Access-Control-Allow-Origin %q, want %q", resp.Request, got, origin)
	}
	for k := range resp.Header {
		if origin == "" && strings.HasPrefix(k, "Access-Control-") {
			t.Errorf("%s: a refused origin got %s", resp.Request, k)
		}
	}
}

// TestPublicClientLogin: a public client logs in with PKCE and no secret,
// refreshes (the token rotates) and a reused refresh token revokes its family; an
// authorization request without PKCE goes back invalid_request; a secret is refused.
func TestPublicClientLogin(t *testing.T) {
	t.Parallel()
	spa := newPublicClient("spa")
	e := startOIDC(t, []oidcClient{spa})

	code, verifier := e.codeFor(t, spa, "alice", true)
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {spa.redirects[0]},
		"client_id": {spa.id}, "code_verifier": {verifier}}
	m := e.postToken(t, form).ExpectStatus(t, http.StatusOK).Object(t)
	rt := str(m["refresh_token"])
	if rt == "" || str(m["id_token"]) == "" {
		t.Fatalf("token answer %v: want an ID token and a refresh token", m)
	}
	e.userinfo(t, str(m["access_token"])).ExpectStatus(t, http.StatusOK)
	refresh := func(token string) *testserver.Response {
		return e.postToken(t, url.Values{"grant_type": {"refresh_token"}, "client_id": {spa.id}, "refresh_token": {token}})
	}
	m2 := refresh(rt).ExpectStatus(t, http.StatusOK).Object(t)
	if str(m2["refresh_token"]) == "" || str(m2["refresh_token"]) == rt {
		t.Fatal("the refresh token did not rotate")
	}
	expectOAuthError(t, refresh(rt), http.StatusBadRequest, "invalid_grant")
	expectOAuthError(t, refresh(str(m2["refresh_token"])), http.StatusBadRequest, "invalid_grant")
	e.expectRevoked(t, str(m2["access_token"]))

	resp := e.do(t, "GET", e.authURL(spa), nil) // no code_challenge
	if resp.Status != http.StatusFound {
		t.Fatalf("authorize without PKCE: status %d, want 302 back to the client", resp.Status)
	}
	q := callbackQuery(t, resp.Header.Get("Location"), spa.redirects[0])
	if q.Get("error") != "invalid_request" || !strings.Contains(q.Get("error_description"), "PKCE") {
		t.Errorf("authorize without PKCE: callback %v, want invalid_request naming PKCE", q)
	}

	code, verifier = e.codeFor(t, spa, "alice", true)
	form = url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {spa.redirects[0]},
		"client_id": {spa.id}, "client_secret": {"guess"}, "code_verifier": {verifier}}
	expectOAuthError(t, e.postToken(t, form), http.StatusUnauthorized, "invalid_client")
}

// TestCORSEndpoints: discovery, JWKS, token, userinfo and revocation answer an
// allowed origin (a public client's redirect URI's origin, or one of its
// allowed_origins) with its echo, errors included, and their preflights with 204;
// an origin not allowed gets no CORS header from the token and revocation
// endpoints, nor userinfo's claims, while the public documents and userinfo's
// errors and preflight answer it (fourth review).
func TestCORSEndpoints(t *testing.T) {
	t.Parallel()
	spa := newPublicClient("spa")
	e := startOIDC(t, []oidcClient{spa})
	redirectOrigin := "https://spa.example"
	form := "Content-Type"
	formType := "application/x-www-form-urlencoded"
	for _, origin := range []string{spaAllowed, redirectOrigin} {
		for _, c := range []struct {
			name, method, path, body string
			status                   int
		}{
			{"discovery", "GET", "/oauth2/.well-known/openid-configuration", "", 200},
			{"jwks", "GET", "/oauth2/jwks", "", 200},
			{"userinfo without a token", "GET", "/oauth2/userinfo", "", 401},
			{"token error", "POST", "/oauth2/token", "grant_type=refresh_token&client_id=spa&refresh_token=x", 400},
			{"revoke", "POST", "/oauth2/revoke", "client_id=spa&token=x", 200},
		} {
			var body any
			if c.body != "" {
				body = c.body
			}
			resp := e.do(t, c.method, c.path, body, "Origin", origin, form, formType).ExpectStatus(t, c.status)
			expectCORS(t, resp, origin)
			// (Fourth review) The public documents and userinfo's errors answer any
			// origin; the token and revocation endpoints only the client's.
			open := c.path != "/oauth2/token" && c.path != "/oauth2/revoke"
			resp = e.do(t, c.method, c.path, body, "Origin", spaDenied, form, formType)
			if open {
				expectCORS(t, resp, spaDenied)
			} else {
				expectCORS(t, resp, "")
			}
			pre := e.do(t, "OPTIONS", c.path, nil, "Origin", origin, "Access-Control-Request-Method", c.method,
				"Access-Control-Request-Headers", "authorization").ExpectStatus(t, http.StatusNoContent)
			expectCORS(t, pre, origin)
			if !strings.Contains(pre.Header.Get("Access-Control-Allow-Headers"), "Authorization") ||
				!strings.Contains(pre.Header.Get("Access-Control-Allow-Methods"), c.method) {
				t.Errorf("%s preflight: headers %v", c.name, pre.Header)
			}
			pre = e.do(t, "OPTIONS", c.path, nil, "Origin", spaDenied, "Access-Control-Request-Method", c.method).ExpectStatus(t, http.StatusNoContent)
			if open {
				expectCORS(t, pre, spaDenied)
			} else {
				expectCORS(t, pre, "")
			}
		}
	}
	// The token endpoint from a page the client does not allow: refused, no CORS.
	code, verifier := e.codeFor(t, spa, "alice", true)
	tokenForm := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {spa.redirects[0]},
		"client_id": {spa.id}, "code_verifier": {verifier}}
	resp := e.postToken(t, tokenForm, "Origin", spaDenied)
	expectOAuthError(t, resp, http.StatusBadRequest, "invalid_request")
	expectCORS(t, resp, "")
	resp = e.postToken(t, tokenForm, "Origin", spaAllowed).ExpectStatus(t, http.StatusOK)
	expectCORS(t, resp, spaAllowed)
	access := str(resp.Object(t)["access_token"])
	resp = e.do(t, "GET", "/oauth2/userinfo", nil, "Origin", spaAllowed, "Authorization", "Bearer "+access).ExpectStatus(t, http.StatusOK)
	expectCORS(t, resp, spaAllowed)
	// The claims are not for a page the token's client does not allow.
	resp = e.do(t, "GET", "/oauth2/userinfo", nil, "Origin", spaDenied, "Authorization", "Bearer "+access).ExpectStatus(t, http.StatusOK)
	expectCORS(t, resp, "")
}

// TestPublicClientCLI: `caddy palmgate client add --public` (the admin API)
// creates a public client with no secret; it logs in with PKCE alone, its origins
// get CORS at once (the dynamic clients' origin index), it has no secret to
// rotate, and `public` cannot be changed afterwards.
func TestPublicClientCLI(t *testing.T) {
	t.Parallel()
	e := startOIDC(t, nil)
	redirect := "https://cli-spa.example/callback"
	var added struct {
		cliClient
		AuthMethod string   `json:"token_endpoint_auth_method"`
		Origins    []string `json:"allowed_origins"`
	}
	e.cliJSON(t, &added, "add", "--name", "CLI SPA", "--redirect-uri", redirect, "--public", "--allowed-origin", spaAllowed)
	if added.Secret != "" || added.AuthMethod != "none" || strings.Join(added.Origins, " ") != spaAllowed+" https://cli-spa.example" {
		t.Fatalf("client add --public --json = %+v", added)
	}
	spa := oidcClient{id: added.ID, public: true, redirects: []string{redirect}}
	code, verifier := e.codeFor(t, spa, "alice", true)
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect},
		"client_id": {added.ID}, "code_verifier": {verifier}}
	resp := e.postToken(t, form, "Origin", spaAllowed).ExpectStatus(t, http.StatusOK)
	expectCORS(t, resp, spaAllowed)
	revokeFrom := func(origin string) *testserver.Response { // the client's own origins: its CORS (the JWKS answers any origin)
		return e.do(t, "POST", "/oauth2/revoke", "client_id="+added.ID+"&token=x", "Origin", origin, "Content-Type", "application/x-www-form-urlencoded")
	}
	expectCORS(t, revokeFrom("https://cli-spa.example").ExpectStatus(t, http.StatusOK), "https://cli-spa.example")
	if out, err := e.cliErr(t, "rotate-secret", added.ID); err == nil {
		t.Errorf("rotate-secret of a public client succeeded:\n%s", out)
	}
	patch := e.do(t, "PATCH", "http://"+e.AdminAddr+"/palmgate/clients/"+added.ID, `{"public":false}`,
		"Content-Type", "application/json", "Origin", "http://"+e.AdminAddr).ExpectStatus(t, http.StatusBadRequest)
	if !strings.Contains(string(patch.Body), "public is chosen when a client is created") {
		t.Errorf("PATCH public: %s, want the refusal to say public is fixed", patch.Body)
	}
	// Its origins can be changed: the extra one goes, the redirect URI's stays.
	e.cli(t, "update", added.ID, "--allowed-origin", "")
	expectCORS(t, revokeFrom(spaAllowed).ExpectStatus(t, http.StatusBadRequest), "")
	expectCORS(t, revokeFrom("https://cli-spa.example").ExpectStatus(t, http.StatusOK), "https://cli-spa.example")
}
