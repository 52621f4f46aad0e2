package integration

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/internal/testserver"
)

// adminCreate creates a client through the admin API and returns it as an
// oidcClient with the admin API's answer.
func (e *env) adminCreate(t *testing.T, body map[string]any) (oidcClient, map[string]any) {
	t.Helper()
	resp := testserver.Do(t, "POST", "http://"+e.AdminAddr+"/palmgate/clients", body, "Origin", "http://"+e.AdminAddr)
	m := resp.ExpectStatus(t, http.StatusCreated).Object(t)
	var redirects []string
	for _, u := range m["redirect_uris"].([]any) {
		redirects = append(redirects, str(u))
	}
	return oidcClient{id: str(m["client_id"]), secret: str(m["client_secret"]), redirects: redirects}, m
}

// expectLogout ends tok's login at /oauth2/logout with its id_token_hint and a
// post_logout_redirect_uri, and expects the 302 there and the login ended.
func (e *env) expectLogout(t *testing.T, c oidcClient, tok tokenSet, postLogout string) {
	t.Helper()
	q := url.Values{"id_token_hint": {tok.id}, "post_logout_redirect_uri": {postLogout}, "state": {"bye-1"}}
	resp := e.do(t, "GET", "/oauth2/logout?"+q.Encode(), nil)
	if resp.Status != http.StatusFound || resp.Header.Get("Location") != postLogout+"?state=bye-1" {
		t.Fatalf("%s: %d Location %q, want 302 to %s?state=bye-1\n%s", resp.Request, resp.Status, resp.Header.Get("Location"), postLogout, testserver.Snippet(resp.Body))
	}
	e.expectRevoked(t, tok.access)
	expectOAuthError(t, e.refresh(t, c, tok.refresh), http.StatusBadRequest, "invalid_grant")
}

// TestDynamicClientLogout (issue 18, finding 3): applications created through
// the admin API, the CLI and the portal are first-class at /oauth2/logout: their
// id_token_hint ends the login and the browser goes to their registered
// post_logout_redirect_uri; their id_token_signed_response_alg signs their ID
// tokens; the admin API, the CLI and the portal refuse bad values clearly.
func TestDynamicClientLogout(t *testing.T) {
	t.Parallel()
	e := startOIDC(t, []oidcClient{newOIDCClient("shop", "")})

	t.Run("admin API", func(t *testing.T) {
		t.Parallel()
		bye := "https://admin-app.example/bye"
		c, m := e.adminCreate(t, map[string]any{"name": "Ops App", "redirect_uris": []string{"https://admin-app.example/cb"},
			"post_logout_redirect_uris": []string{bye}, "id_token_signed_response_alg": "ES256"})
		if str(m["id_token_signed_response_alg"]) != "ES256" || len(m["post_logout_redirect_uris"].([]any)) != 1 {
			t.Errorf("created client %v", m)
		}
		tok := e.tokensFor(t, c, e.subject("ann"), "openid offline_access")
		if alg := str(jwtPart(t, tok.id, 0)["alg"]); alg != "ES256" {
			t.Errorf("ID token alg %s, want ES256", alg)
		}
		kept := e.tokensFor(t, c, e.subject("ann"), "openid offline_access")
		e.expectLogout(t, c, tok, bye)
		e.expectUserinfo(t, kept.access, kept.sub)
		// client_id alone, and a URI it did not register.
		resp := e.do(t, "GET", "/oauth2/logout?"+url.Values{"client_id": {c.id}, "post_logout_redirect_uri": {bye}}.Encode(), nil)
		if resp.Status != http.StatusFound || resp.Header.Get("Location") != bye {
			t.Errorf("logout with client_id %s: %d %q", c.id, resp.Status, resp.Header.Get("Location"))
		}
		logoutPage(t, e.do(t, "GET", "/oauth2/logout?"+url.Values{"id_token_hint": {kept.id}, "post_logout_redirect_uri": {"https://evil.example/"}}.Encode(), nil, "Accept", browserAccept),
			http.StatusBadRequest, "not registered")
		e.expectUserinfo(t, kept.access, kept.sub)

		// PATCH changes both; a refused value changes nothing.
		admin := "http://" + e.AdminAddr + "/palmgate/clients/" + c.id
		got := testserver.Do(t, "PATCH", admin, map[string]any{"id_token_signed_response_alg": "EdDSA", "post_logout_redirect_uris": []string{}},
			"Origin", "http://"+e.AdminAddr).ExpectStatus(t, http.StatusOK).Object(t)
		if str(got["id_token_signed_response_alg"]) != "EdDSA" || len(got["post_logout_redirect_uris"].([]any)) != 0 {
			t.Errorf("PATCH = %v", got)
		}
		if alg := str(jwtPart(t, e.tokensFor(t, c, e.subject("ann"), "openid").id, 0)["alg"]); alg != "EdDSA" {
			t.Errorf("ID token alg after PATCH %s, want EdDSA", alg)
		}
	})

	t.Run("admin API refusals", func(t *testing.T) {
		t.Parallel()
		cb := []string{"https://a.example/cb"}
		for _, tc := range []struct {
			name string
			body map[string]any
			want string
		}{
			{"alg HS256", map[string]any{"name": "x", "redirect_uris": cb, "id_token_signed_response_alg": "HS256"}, "id_token_signed_response_alg"},
			{"alg none", map[string]any{"name": "x", "redirect_uris": cb, "id_token_signed_response_alg": "none"}, "id_token_signed_response_alg"},
			{"alg not a string", map[string]any{"name": "x", "redirect_uris": cb, "id_token_signed_response_alg": 256}, "body"},
			{"post-logout fragment", map[string]any{"name": "x", "redirect_uris": cb, "post_logout_redirect_uris": []string{"https://a.example/bye#x"}}, "post_logout_redirect_uri"},
			{"post-logout relative", map[string]any{"name": "x", "redirect_uris": cb, "post_logout_redirect_uris": []string{"/bye"}}, "post_logout_redirect_uri"},
			{"post-logout not a list", map[string]any{"name": "x", "redirect_uris": cb, "post_logout_redirect_uris": "https://a.example/bye"}, "body"},
			{"reserved name", map[string]any{"name": "palmgate developer portal", "redirect_uris": cb}, "reserved"},
			{"static client's name", map[string]any{"name": "App shop", "redirect_uris": cb}, "operator"},
			{"bidi name", map[string]any{"name": "x\u202egnp.exe", "redirect_uris": cb}, "bidi"},
		} {
			resp := testserver.Do(t, "POST", "http://"+e.AdminAddr+"/palmgate/clients", tc.body, "Origin", "http://"+e.AdminAddr)
			if resp.Status != http.StatusBadRequest || !strings.Contains(string(resp.Body), tc.want) {
				t.Errorf("%s: %d %s; want 400 with %q", tc.name, resp.Status, resp.Body, tc.want)
			}
		}
	})

	t.Run("CLI", func(t *testing.T) {
		t.Parallel()
		bye := "https://cli-app.example/bye"
		var added cliClientLogout
		e.cliJSON(t, &added, "add", "--name", "CLI Logout App", "--redirect-uri", "https://cli-app.example/cb",
			"--post-logout-redirect-uri", bye, "--id-token-alg", "ES256")
		if added.IDTokenAlg != "ES256" || len(added.PostLogout) != 1 || added.PostLogout[0] != bye {
			t.Fatalf("client add --json = %+v", added)
		}
		c := oidcClient{id: added.ID, secret: added.Secret, redirects: added.RedirectURIs}
		tok := e.tokensFor(t, c, e.subject("cli"), "openid offline_access")
		if alg := str(jwtPart(t, tok.id, 0)["alg"]); alg != "ES256" {
			t.Errorf("ID token alg %s, want ES256", alg)
		}
		e.expectLogout(t, c, tok, bye)
		if out := e.cli(t, "show", added.ID); !strings.Contains(out, bye) || !strings.Contains(out, "ES256") {
			t.Errorf("client show lacks the post-logout URI or the alg:\n%s", out)
		}
		var updated cliClientLogout
		e.cliJSON(t, &updated, "update", added.ID, "--post-logout-redirect-uri", "", "--id-token-alg", "EdDSA")
		if updated.IDTokenAlg != "EdDSA" || len(updated.PostLogout) != 0 || updated.Name != "CLI Logout App" {
			t.Errorf("client update = %+v; want EdDSA, no post-logout URI, the name unchanged", updated)
		}
		for _, tc := range []struct {
			name string
			args []string
			want string
		}{
			{"bad alg", []string{"add", "--name", "x", "--redirect-uri", "https://a.example/cb", "--id-token-alg", "HS256"}, "--id-token-alg"},
			{"bad post-logout URI", []string{"update", added.ID, "--post-logout-redirect-uri", "ftp://a.example/bye"}, "--post-logout-redirect-uri \"ftp://a.example/bye\": "},
			{"reserved name", []string{"add", "--name", "Admin", "--redirect-uri", "https://a.example/cb"}, "reserved"},
		} {
			if out, err := e.cliErr(t, tc.args...); err == nil || !strings.Contains(out, tc.want) {
				t.Errorf("%s: caddy palmgate client %v: %v, output lacks %q:\n%s", tc.name, tc.args, err, tc.want, out)
			}
		}
	})

	t.Run("portal", func(t *testing.T) {
		t.Parallel()
		dev := e.portalSignIn(t, e.subject("dev"))
		bye, cb := "https://dev-app.example/bye", "https://dev-app.example/cb"
		r := dev.post(t, "/portal/apps", url.Values{"csrf": {dev.csrf(t)}, "name": {"Dev App"}, "redirect_uris": {cb},
			"post_logout_redirect_uris": {bye}, "id_token_signed_response_alg": {"ES256"}})
		if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `id="id-token-alg">ES256<`) {
			t.Fatalf("creating an application with both fields: %d %s", r.Status, testserver.Snippet(r.Body))
		}
		id, secret := pageClient(t, r.Body)
		c := oidcClient{id: id, secret: secret, redirects: []string{cb}}
		tok := e.tokensFor(t, c, e.subject("user"), "openid offline_access")
		if alg := str(jwtPart(t, tok.id, 0)["alg"]); alg != "ES256" {
			t.Errorf("ID token alg %s, want ES256", alg)
		}
		e.expectLogout(t, c, tok, bye)
		for _, tc := range []struct{ field, value, want string }{
			{"id_token_signed_response_alg", "HS256", "id_token_signed_response_alg"},
			{"post_logout_redirect_uris", "javascript:alert(1)", "post_logout_redirect_uri"},
			{"name", "Acme Admin", "reserved"},
		} {
			form := url.Values{"csrf": {dev.csrf(t)}, "name": {"Dev App"}, "redirect_uris": {cb}}
			form.Set(tc.field, tc.value)
			if r := dev.post(t, "/portal/apps/"+id, form); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), tc.want) {
				t.Errorf("portal update with %s %q: %d, want 400 naming %q", tc.field, tc.value, r.Status, tc.want)
			}
		}
	})
}

// cliClientLogout is a client as `caddy palmgate client ... --json` prints it,
// with the fields of RP-initiated logout and the ID token's algorithm.
type cliClientLogout struct {
	cliClient
	PostLogout []string `json:"post_logout_redirect_uris"`
	IDTokenAlg string   `json:"id_token_signed_response_alg"`
}

// TestSelfRegisteredConsent (issue 18, finding 5): the scan URL's JSON and the
// login page mark an application a developer registered in the portal, and do
// not mark the operator's (static, or created through the admin API).
func TestSelfRegisteredConsent(t *testing.T) {
	t.Parallel()
	shop := newOIDCClient("shop", "")
	e := startOIDC(t, []oidcClient{shop})
	dev := e.portalSignIn(t, e.subject("dev"))
	selfID, selfSecret := dev.create(t, "Dev Shop", "https://dev-shop.example/cb")
	self := oidcClient{id: selfID, secret: selfSecret, redirects: []string{"https://dev-shop.example/cb"}}
	ops, _ := e.adminCreate(t, map[string]any{"name": "Ops Shop", "redirect_uris": []string{"https://ops-shop.example/cb"}})
	const notice = "registered by a developer, not by the operator"
	for _, tc := range []struct {
		name string
		c    oidcClient
		self bool
	}{{"portal app", self, true}, {"admin API app", ops, false}, {"static app", shop, false}} {
		t.Run(tc.name, func(t *testing.T) {
			id := e.authorize(t, e.authURL(tc.c))
			p := e.loginPageJSON(t, id)
			req, _ := e.do(t, "GET", p.ScanURL, nil).ExpectStatus(t, http.StatusOK).Object(t)["request"].(map[string]any)
			if got, _ := req["selfRegistered"].(bool); got != tc.self || (str(req["clientNotice"]) == notice) != tc.self {
				t.Errorf("scan URL request %v: want selfRegistered %v with the notice", req, tc.self)
			}
			page := e.do(t, "GET", e.verifyURL(id), nil).ExpectStatus(t, http.StatusOK)
			if strings.Contains(string(page.Body), notice) != tc.self {
				t.Errorf("login page mentions %q: %v, want %v\n%s", notice, !tc.self, tc.self, testserver.Snippet(page.Body))
			}
		})
	}
}
