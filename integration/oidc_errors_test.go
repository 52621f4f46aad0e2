package integration

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
)

// TestOIDCAuthorizeErrors covers the refusals of /oauth2/authorize. A request
// whose client or redirect_uri is unknown, missing or repeated is a 400 and never
// a redirect; once both are valid, every refusal goes back to the redirect_uri
// (RFC 6749 4.1.2.1, OIDC Core 3.1.2.6) with error, error_description, the state
// (dropped when it is longer than 500 characters or repeated) and iss (RFC 9207).
func TestOIDCAuthorizeErrors(t *testing.T) {
	t.Parallel()
	c := newOIDCClient("shop", "")
	e := startOIDC(t, []oidcClient{c})
	valid := func(params ...string) string { return e.authURL(c, append([]string{"state", "st-1"}, params...)...) }
	iss := e.URL + "/oauth2" // RFC 9207: every authorization response names it
	challenge := strings.Repeat("a", 43)

	// Never a redirect: the client or its redirect_uri is not known good.
	cases := []struct {
		name   string
		url    string
		status int
		code   string
	}{
		{"missing client_id", valid("client_id", ""), 400, "invalid_request"},
		{"unknown client_id", valid("client_id", "nobody"), 400, "invalid_request"},
		{"missing redirect_uri", valid("redirect_uri", ""), 400, "invalid_request"},
		{"unregistered redirect_uri", valid("redirect_uri", "https://evil.example/callback"), 400, "invalid_request"},
		{"redirect_uri with a trailing slash", valid("redirect_uri", c.redirects[0]+"/"), 400, "invalid_request"},
		{"redirect_uri with an extra query", valid("redirect_uri", c.redirects[0]+"?x=1"), 400, "invalid_request"},
		{"redirect_uri in another case", valid("redirect_uri", strings.ToUpper(c.redirects[0])), 400, "invalid_request"},
		{"redirect_uri of another scheme", valid("redirect_uri", strings.Replace(c.redirects[0], "https:", "http:", 1)), 400, "invalid_request"},
		{"duplicated client_id", valid() + "&client_id=" + c.id, 400, "invalid_request"},
		{"duplicated redirect_uri", valid() + "&redirect_uri=" + url.QueryEscape(c.redirects[0]), 400, "invalid_request"},
		{"prompt=none with an unknown client", valid("prompt", "none", "client_id", "nobody"), 400, "invalid_request"},
		{"prompt=none with an unregistered redirect_uri", valid("prompt", "none", "redirect_uri", "https://evil.example/cb"), 400, "invalid_request"},
		{"form_post with an unregistered redirect_uri", valid("response_mode", "form_post", "redirect_uri", "https://evil.example/cb"), 400, "invalid_request"},
		{"bad scope with an unknown client", valid("scope", "profile", "client_id", "nobody"), 400, "invalid_request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			expectOAuthError(t, e.do(t, "GET", tc.url, nil), tc.status, tc.code)
		})
	}

	t.Run("POST with a JSON body", func(t *testing.T) {
		t.Parallel()
		resp := e.do(t, "POST", "/oauth2/authorize", map[string]string{"client_id": c.id, "response_type": "code"})
		expectOAuthError(t, resp, http.StatusBadRequest, "invalid_request")
	})
	t.Run("PUT is 405 with Allow", func(t *testing.T) {
		t.Parallel()
		resp := e.do(t, "PUT", valid(), nil)
		if resp.Status != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, POST" || resp.Header.Get("Location") != "" {
			t.Errorf("%s: %d Allow %q, want 405 with Allow \"GET, POST\" and no redirect\nbody: %s", resp.Request, resp.Status, resp.Header.Get("Allow"), resp.Body)
		}
		if m := resp.Object(t); str(m["error"]) != "invalid_request" || str(m["error_description"]) == "" || m["code"] != nil {
			t.Errorf("%s: body %s, want OAuth's invalid_request with a description", resp.Request, resp.Body)
		}
	})

	// Back to the client: 302 to the redirect_uri with the error.
	refusals := []struct {
		name     string
		url      string
		redirect string // the redirect_uri; "" means c.redirects[0]
		code     string
		state    string // the state that goes back; "-" for none
	}{
		{"missing response_type", valid("response_type", ""), "", "invalid_request", "st-1"},
		{"response_type token", valid("response_type", "token"), "", "unsupported_response_type", "st-1"},
		{"response_type code id_token", valid("response_type", "code id_token"), "", "unsupported_response_type", "st-1"},
		{"missing scope", valid("scope", ""), "", "invalid_scope", "st-1"},
		{"scope without openid", valid("scope", "profile offline_access"), "", "invalid_scope", "st-1"},
		{"scope not allowed for the client", valid("scope", "openid admin"), "", "invalid_scope", "st-1"},
		{"scope with an invalid character", valid("scope", `openid "quoted"`), "", "invalid_scope", "st-1"},
		{"resource not allowed", valid("resource", "https://api.example"), "", "invalid_target", "st-1"},
		{"state of 501 characters: refused, not echoed", valid("state", strings.Repeat("s", 501)), "", "invalid_request", "-"},
		{"duplicated state: refused, not echoed", valid() + "&state=again", "", "invalid_request", "-"},
		{"nonce of 501 characters", valid("nonce", strings.Repeat("n", 501)), "", "invalid_request", "st-1"},
		{"duplicated scope", valid() + "&scope=openid", "", "invalid_request", "st-1"},
		{"code_challenge_method plain", valid("code_challenge", challenge, "code_challenge_method", "plain"), "", "invalid_request", "st-1"},
		{"code_challenge without a method", valid("code_challenge", challenge), "", "invalid_request", "st-1"},
		{"code_challenge_method without a challenge", valid("code_challenge_method", "S256"), "", "invalid_request", "st-1"},
		{"code_challenge of 42 characters", valid("code_challenge", challenge[1:], "code_challenge_method", "S256"), "", "invalid_request", "st-1"},
		{"code_challenge of 129 characters", valid("code_challenge", strings.Repeat("a", 129), "code_challenge_method", "S256"), "", "invalid_request", "st-1"},
		{"code_challenge with padding", valid("code_challenge", challenge+"=", "code_challenge_method", "S256"), "", "invalid_request", "st-1"},
		{"prompt=none", valid("prompt", "none", "state", "xyz"), "", "login_required", "xyz"},
		{"prompt=none at a redirect_uri with a query", valid("prompt", "none", "state", "q1", "redirect_uri", c.redirects[1]), c.redirects[1], "login_required", "q1"},
		{"prompt=none without state", valid("prompt", "none", "state", ""), "", "login_required", "-"},
		{"prompt=none with login", valid("prompt", "none login"), "", "invalid_request", "st-1"},
		{"prompt unknown", valid("prompt", "sideways"), "", "invalid_request", "st-1"},
		{"max_age not a number", valid("max_age", "soon"), "", "invalid_request", "st-1"},
		{"response_mode fragment", valid("response_mode", "fragment"), "", "invalid_request", "st-1"},
		{"response_mode unknown", valid("response_mode", "web_message"), "", "invalid_request", "st-1"},
		// OIDC Core 6: request objects are refused, not ignored.
		{"request object", valid("request", "eyJhbGciOiJub25lIn0.e30.", "state", "r1"), "", "request_not_supported", "r1"},
		{"request_uri", valid("request_uri", "https://app.example/r.jwt", "state", "r2"), "", "request_uri_not_supported", "r2"},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			redirect := cmp.Or(tc.redirect, c.redirects[0])
			resp := e.do(t, "GET", tc.url, nil)
			if resp.Status != http.StatusFound {
				t.Fatalf("%s: status %d, want 302 to the client\nbody: %s", resp.Request, resp.Status, resp.Body)
			}
			q := callbackQuery(t, resp.Header.Get("Location"), redirect)
			want := url.Values{"error": {tc.code}, "iss": {iss}}
			if tc.state != "-" {
				want.Set("state", tc.state)
			}
			if q.Get("error_description") == "" {
				t.Errorf("%s: redirect query %v has no error_description", resp.Request, q)
			}
			q.Del("error_description")
			if q.Encode() != want.Encode() {
				t.Errorf("%s: redirect query %v, want %v (and error_description)", resp.Request, q, want)
			}
		})
	}

	// Accepted: the 302 goes to the login page.
	for _, tc := range []struct{ name, url string }{
		{"state of 500 characters", valid("state", strings.Repeat("s", 500))},
		{"unknown parameters are ignored", valid("display", "page", "ui_locales", "fr", "foo", "bar")},
		{"S256 challenge of 128 characters", valid("code_challenge", strings.Repeat("a", 128), "code_challenge_method", "S256")},
		{"max_age and prompt login consent", valid("max_age", "0", "prompt", "login consent")},
		{"response_mode query", valid("response_mode", "query")},
		{"response_mode form_post", valid("response_mode", "form_post")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e.loginPageJSON(t, e.authorize(t, tc.url))
		})
	}
	t.Run("POST form", func(t *testing.T) {
		t.Parallel()
		resp := e.do(t, "POST", "/oauth2/authorize", strings.SplitN(valid(), "?", 2)[1], "Content-Type", "application/x-www-form-urlencoded")
		if !strings.HasPrefix(resp.Header.Get("Location"), e.URL+"/oauth2/verify?auth_request_id=") || resp.Status != http.StatusFound {
			t.Errorf("%s: %d Location %q, want 302 to the login page", resp.Request, resp.Status, resp.Header.Get("Location"))
		}
	})
}

// TestOIDCLoginPageErrors covers the login page's refusals and the denied
// login, which goes back to the client with access_denied.
func TestOIDCLoginPageErrors(t *testing.T) {
	t.Parallel()
	c := newOIDCClient("shop", "")
	e := startOIDC(t, []oidcClient{c})

	for _, tc := range []struct{ name, id string }{
		{"missing auth_request_id", ""},
		{"malformed auth_request_id", "not-a-uuid"},
		{"unknown auth_request_id", "0b6c8d3e-8f0a-4c1e-9d57-3c2a1b0e9f44"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			expectOAuthError(t, e.do(t, "GET", e.verifyURL(tc.id), nil), http.StatusBadRequest, "invalid_request")
			expectOAuthError(t, e.do(t, "GET", e.verifyURL(tc.id), nil, "Accept", "application/json"), http.StatusBadRequest, "invalid_request")
		})
	}

	t.Run("denied login", func(t *testing.T) {
		t.Parallel()
		id := e.authorize(t, e.authURL(c, "state", "deny-me"))
		p := e.loginPageJSON(t, id)
		resp := e.do(t, "POST", "/v1/palm/challenges/"+p.ChallengeID+"/deny", map[string]string{"nonce": p.Nonce}).ExpectStatus(t, http.StatusOK)
		if got := e.loginPageJSON(t, id).Status; got != "denied" {
			t.Errorf("login page status %q after deny (%s), want denied", got, resp.Body)
		}
		q := e.finish(t, id, c.redirects[0])
		if q.Get("error_description") == "" {
			t.Errorf("denied login: callback query %v has no error_description", q)
		}
		q.Del("error_description")
		if q.Encode() != (url.Values{"error": {"access_denied"}, "state": {"deny-me"}, "iss": {e.URL + "/oauth2"}}).Encode() {
			t.Errorf("denied login: callback query %v, want error=access_denied&state=deny-me&iss (and error_description)", q)
		}
		expectOAuthError(t, e.do(t, "GET", e.verifyURL(id), nil, "Accept", "application/json"), http.StatusBadRequest, "invalid_request")
	})

	t.Run("answered login, also as JSON", func(t *testing.T) {
		t.Parallel()
		id := e.authorize(t, e.authURL(c))
		p := e.loginPageJSON(t, id)
		e.scan(t, p, e.subject("bob"))
		e.finish(t, id, c.redirects[0]) // checks the HTML page's 400
		expectOAuthError(t, e.do(t, "GET", e.verifyURL(id), nil, "Accept", "application/json"), http.StatusBadRequest, "invalid_request")
	})
}

// TestOIDCTokenErrors covers the refusals of /oauth2/token.
func TestOIDCTokenErrors(t *testing.T) {
	t.Parallel()
	c, other := newOIDCClient("shop", ""), newOIDCClient("forum", "")
	e := startOIDC(t, []oidcClient{c, other})
	basicChallenge := `Basic realm="palmgate"`

	// Fixtures: a fresh code per case, and one refresh family shared by the
	// cases that leave it untouched.
	codeForm := func(t *testing.T, pkce bool) (url.Values, string) {
		code, verifier := e.codeFor(t, c, e.subject("alice"), pkce)
		return url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {c.redirects[0]},
			"client_id": {c.id}, "client_secret": {c.secret}}, verifier
	}
	code, _ := e.codeFor(t, c, e.subject("alice"), false)
	tokens := e.exchange(t, c, code, "")
	refresh := str(tokens["refresh_token"])
	otherCode, _ := e.codeFor(t, other, e.subject("alice"), false)
	otherRefresh := str(e.exchange(t, other, otherCode, "")["refresh_token"])
	refreshForm := func(token string) url.Values {
		return url.Values{"grant_type": {"refresh_token"}, "refresh_token": {token}, "client_id": {c.id}, "client_secret": {c.secret}}
	}
	with := func(f url.Values, kv ...string) url.Values {
		g := url.Values{}
		for k, v := range f {
			g[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				g.Del(kv[i])
			} else {
				g.Set(kv[i], kv[i+1])
			}
		}
		return g
	}

	cases := []struct {
		name    string
		req     func(t *testing.T) (string, []string) // form body and extra headers
		status  int
		code    string
		wwwAuth string // the exact WWW-Authenticate, or "" for none
	}{
		{"missing client credentials", func(t *testing.T) (string, []string) {
			return with(refreshForm(refresh), "client_id", "", "client_secret", "").Encode(), nil
		}, 401, "invalid_client", basicChallenge},
		{"unknown client", func(t *testing.T) (string, []string) {
			return with(refreshForm(refresh), "client_id", "nobody").Encode(), nil
		}, 401, "invalid_client", basicChallenge},
		{"wrong secret, client_secret_post", func(t *testing.T) (string, []string) {
			return with(refreshForm(refresh), "client_secret", c.secret+"x").Encode(), nil
		}, 401, "invalid_client", basicChallenge},
		{"missing secret, client_secret_post", func(t *testing.T) (string, []string) {
			return with(refreshForm(refresh), "client_secret", "").Encode(), nil
		}, 401, "invalid_client", basicChallenge},
		{"another client's secret", func(t *testing.T) (string, []string) {
			return with(refreshForm(refresh), "client_secret", other.secret).Encode(), nil
		}, 401, "invalid_client", basicChallenge},
		{"wrong secret, client_secret_basic", func(t *testing.T) (string, []string) {
			return with(refreshForm(refresh), "client_id", "", "client_secret", "").Encode(), []string{"Authorization", basicAuth(c.id, "wrong")}
		}, 401, "invalid_client", basicChallenge},
		{"client_secret_basic and client_secret_post at once", func(t *testing.T) (string, []string) {
			return refreshForm(refresh).Encode(), []string{"Authorization", basicAuth(c.id, c.secret)}
		}, 400, "invalid_request", ""},
		{"client_secret_basic with another client_id in the form", func(t *testing.T) (string, []string) {
			return with(refreshForm(refresh), "client_id", other.id, "client_secret", "").Encode(), []string{"Authorization", basicAuth(c.id, c.secret)}
		}, 400, "invalid_request", ""},
		{"duplicated parameter", func(t *testing.T) (string, []string) {
			return refreshForm(refresh).Encode() + "&grant_type=refresh_token", nil
		}, 400, "invalid_request", ""},
		{"missing grant_type", func(t *testing.T) (string, []string) {
			return with(refreshForm(refresh), "grant_type", "").Encode(), nil
		}, 400, "invalid_request", ""},
		{"grant_type password", func(t *testing.T) (string, []string) {
			return with(refreshForm(refresh), "grant_type", "password", "username", "a", "password", "b").Encode(), nil
		}, 400, "unsupported_grant_type", ""},
		{"grant_type client_credentials", func(t *testing.T) (string, []string) {
			return with(refreshForm(refresh), "grant_type", "client_credentials").Encode(), nil
		}, 400, "unsupported_grant_type", ""},
		{"missing code", func(t *testing.T) (string, []string) {
			f, _ := codeForm(t, false)
			return with(f, "code", "").Encode(), nil
		}, 400, "invalid_request", ""},
		{"unknown code", func(t *testing.T) (string, []string) {
			f, _ := codeForm(t, false)
			return with(f, "code", "bm90LWEtY29kZQ").Encode(), nil
		}, 400, "invalid_grant", ""},
		{"missing redirect_uri", func(t *testing.T) (string, []string) {
			f, _ := codeForm(t, false)
			return with(f, "redirect_uri", "").Encode(), nil
		}, 400, "invalid_request", ""},
		{"another registered redirect_uri", func(t *testing.T) (string, []string) {
			f, _ := codeForm(t, false)
			return with(f, "redirect_uri", c.redirects[1]).Encode(), nil
		}, 400, "invalid_grant", ""},
		{"code of another client", func(t *testing.T) (string, []string) {
			f, _ := codeForm(t, false)
			return with(f, "client_id", other.id, "client_secret", other.secret).Encode(), nil
		}, 400, "invalid_grant", ""},
		{"used code", func(t *testing.T) (string, []string) {
			f, _ := codeForm(t, false)
			e.postToken(t, f).ExpectStatus(t, http.StatusOK)
			return f.Encode(), nil
		}, 400, "invalid_grant", ""},
		{"code_verifier without a code_challenge", func(t *testing.T) (string, []string) {
			f, _ := codeForm(t, false)
			return with(f, "code_verifier", strings.Repeat("v", 43)).Encode(), nil
		}, 400, "invalid_grant", ""},
		{"missing code_verifier", func(t *testing.T) (string, []string) {
			f, _ := codeForm(t, true)
			return f.Encode(), nil
		}, 400, "invalid_grant", ""},
		{"wrong code_verifier", func(t *testing.T) (string, []string) {
			f, _ := codeForm(t, true)
			return with(f, "code_verifier", strings.Repeat("v", 43)).Encode(), nil
		}, 400, "invalid_grant", ""},
		{"malformed code_verifier", func(t *testing.T) (string, []string) {
			f, verifier := codeForm(t, true)
			return with(f, "code_verifier", verifier[:42]).Encode(), nil
		}, 400, "invalid_request", ""},
		{"missing refresh_token", func(t *testing.T) (string, []string) {
			return with(refreshForm(refresh), "refresh_token", "").Encode(), nil
		}, 400, "invalid_request", ""},
		{"garbage refresh_token", func(t *testing.T) (string, []string) {
			return refreshForm("not.a.jwt").Encode(), nil
		}, 400, "invalid_grant", ""},
		{"tampered refresh_token", func(t *testing.T) (string, []string) {
			return refreshForm(tamper(refresh)).Encode(), nil
		}, 400, "invalid_grant", ""},
		{"access token as refresh_token", func(t *testing.T) (string, []string) {
			return refreshForm(str(tokens["access_token"])).Encode(), nil
		}, 400, "invalid_grant", ""},
		{"ID token as refresh_token", func(t *testing.T) (string, []string) {
			return refreshForm(str(tokens["id_token"])).Encode(), nil
		}, 400, "invalid_grant", ""},
		{"refresh_token of another client", func(t *testing.T) (string, []string) {
			return refreshForm(otherRefresh).Encode(), nil
		}, 400, "invalid_grant", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body, headers := tc.req(t)
			resp := e.do(t, "POST", "/oauth2/token", body, append([]string{"Content-Type", "application/x-www-form-urlencoded"}, headers...)...)
			expectOAuthError(t, resp, tc.status, tc.code)
			if got := strings.Join(resp.Header.Values("WWW-Authenticate"), "; "); got != tc.wwwAuth {
				t.Errorf("%s: WWW-Authenticate %q, want %q", resp.Request, got, tc.wwwAuth)
			}
			if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("%s: Cache-Control %q, want no-store", resp.Request, cc)
			}
		})
	}

	// A narrowing without openid is allowed (issue 21: TestStockScopeDefaults); one
	// beyond the grant, with or without openid, is not.
	for _, scope := range []string{"openid admin", "offline_access email"} {
		t.Run("refresh with scope "+scope+" is invalid_scope and keeps the refresh token", func(t *testing.T) {
			t.Parallel()
			f, _ := codeForm(t, false)
			own := str(e.exchange(t, c, f.Get("code"), "")["refresh_token"])
			expectOAuthError(t, e.postToken(t, with(refreshForm(own), "scope", scope)), http.StatusBadRequest, "invalid_scope")
			resp := e.postToken(t, refreshForm(own))
			if resp.Status != http.StatusOK {
				t.Errorf("refresh with the same token after the refused scope: %d %s, want 200 (a refused request must not rotate the token)",
					resp.Status, testserver.Snippet(resp.Body))
			}
		})
	}
	t.Run("JSON body", func(t *testing.T) {
		t.Parallel()
		expectOAuthError(t, e.do(t, "POST", "/oauth2/token", map[string]string{"grant_type": "refresh_token"}), http.StatusBadRequest, "invalid_request")
	})
	t.Run("GET is 405 with Allow", func(t *testing.T) {
		t.Parallel()
		resp := e.do(t, "GET", "/oauth2/token?"+refreshForm(refresh).Encode(), nil)
		if resp.Status != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "OPTIONS, POST" { // OPTIONS: the CORS preflight
			t.Errorf("%s: %d Allow %q, want 405 with Allow OPTIONS, POST\nbody: %s", resp.Request, resp.Status, resp.Header.Get("Allow"), resp.Body)
		}
		if m := resp.Object(t); str(m["error"]) != "invalid_request" || m["code"] != nil {
			t.Errorf("%s: body %s, want OAuth's invalid_request", resp.Request, resp.Body)
		}
	})

	// The shared refresh family survived every refused request above.
	t.Cleanup(func() {
		resp := e.postToken(t, refreshForm(refresh))
		if resp.Status != http.StatusOK || str(resp.Object(t)["refresh_token"]) == "" {
			t.Errorf("refresh after the refused requests: %d %s, want 200 with a new refresh token", resp.Status, testserver.Snippet(resp.Body))
		}
	})
}

// encodeSegment encodes a JWT header or payload.
func encodeSegment(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// TestOIDCExpiredCode checks that a code is refused once auth_code_ttl has
// passed.
func TestOIDCExpiredCode(t *testing.T) {
	t.Parallel()
	c := newOIDCClient("shop", "")
	// ttl: long enough for a fresh code to reach the token endpoint on a loaded
	// machine. The code was issued before it reached the test: past ttl from
	// then, it has expired.
	const ttl = 5 * time.Second
	e := startOIDC(t, []oidcClient{c}, fmt.Sprintf("auth_code_ttl %s", ttl))
	code, _ := e.codeFor(t, c, e.subject("alice"), false)
	time.Sleep(ttl + 500*time.Millisecond)
	expectOAuthError(t, e.postToken(t, url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"redirect_uri": {c.redirects[0]}, "client_id": {c.id}, "client_secret": {c.secret}}), http.StatusBadRequest, "invalid_grant")
	// A code used within its lifetime works with the same configuration.
	fresh, _ := e.codeFor(t, c, e.subject("bob"), false)
	e.exchange(t, c, fresh, "")
}

// TestOIDCLoginTTL checks that login_ttl sets how long a login waits for its
// palm scan: the login page's expiry and its challenge's, a scan refused once
// it has passed, and the login answered access_denied (expired).
func TestOIDCLoginTTL(t *testing.T) {
	t.Parallel()
	c := newOIDCClient("shop", "")
	// Long enough for the requests before the wait to find the login pending on
	// a loaded machine; the wait is until the expiry the server set.
	const ttl = 10 * time.Second
	e := startOIDC(t, []oidcClient{c}, fmt.Sprintf("login_ttl %s", ttl))
	before := time.Now()
	id := e.authorize(t, e.authURL(c, "state", "slow-scan"))
	p := e.loginPageJSON(t, id)
	after := time.Now()
	expires := parseTime(t, p.ExpiresAt)
	between(t, "login page expiresAt with login_ttl 10s", expires, before.Add(ttl), after.Add(ttl), time.Millisecond)
	challenge := challengeInfo{ChallengeID: p.ChallengeID, Nonce: p.Nonce, ScanURL: p.ScanURL}
	between(t, "palm challenge expiresAt with login_ttl 10s", parseTime(t, str(e.challenge(t, challenge)["expiresAt"])), before.Add(ttl), after.Add(ttl), time.Millisecond)
	if t.Failed() {
		t.FailNow() // not the configured lifetime: waiting for it would tell nothing more
	}
	if p.Status != "pending" || e.challengeStatus(t, challenge) != "pending" {
		t.Fatalf("login right after the request: page status %q, challenge %q; want pending (expiresAt %s)", p.Status, e.challengeStatus(t, challenge), p.ExpiresAt)
	}

	time.Sleep(time.Until(expires.Add(100 * time.Millisecond)))
	if got := e.challengeStatus(t, challenge); got != "expired" {
		t.Errorf("palm challenge status %q after expiresAt, want expired", got)
	}
	if resp := e.devScan(t, challenge, e.subject("late")); resp.Status != http.StatusGone {
		t.Errorf("dev-scan after expiresAt: status %d, want 410\nbody: %s", resp.Status, resp.Body)
	}
	q := e.finish(t, id, c.redirects[0])
	q.Del("error_description")
	if q.Encode() != (url.Values{"error": {"access_denied"}, "state": {"slow-scan"}, "iss": {e.URL + "/oauth2"}}).Encode() {
		t.Errorf("expired login: callback query %v, want error=access_denied&state=slow-scan&iss", q)
	}
}

// tamper flips a character in the middle of a JWT's signature.
func tamper(token string) string {
	i := strings.LastIndex(token, ".") + 10
	b := []byte(token)
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// TestOIDCUserinfoErrors covers the refusals of /oauth2/userinfo and their
// RFC 6750 challenges.
func TestOIDCUserinfoErrors(t *testing.T) {
	t.Parallel()
	c := newOIDCClient("shop", "")
	e := startOIDC(t, []oidcClient{c})
	code, _ := e.codeFor(t, c, e.subject("alice"), false)
	tokens := e.exchange(t, c, code, "")
	access := str(tokens["access_token"])
	// A token whose grant was revoked by a reused code.
	reused, _ := e.codeFor(t, c, e.subject("bob"), false)
	revoked := str(e.exchange(t, c, reused, "")["access_token"])
	expectOAuthError(t, e.postToken(t, url.Values{"grant_type": {"authorization_code"}, "code": {reused},
		"redirect_uri": {c.redirects[0]}, "client_id": {c.id}, "client_secret": {c.secret}}), http.StatusBadRequest, "invalid_grant")
	parts := strings.Split(access, ".")
	noneHeader := jwtPart(t, access, 0)
	noneHeader["alg"] = "none"
	algNone := encodeSegment(t, noneHeader) + "." + parts[1] + "."

	cases := []struct {
		name          string
		method        string
		authorization string // "" sends none
		status        int
		challenge     string // "" wants exactly `Bearer realm="palmgate"`
	}{
		{"no Authorization", "GET", "", 401, ""},
		{"no Authorization, POST", "POST", "", 401, ""},
		{"Basic credentials", "GET", basicAuth(c.id, c.secret), 401, ""},
		{"empty Bearer", "GET", "Bearer ", 401, ""},
		{"garbage token", "GET", "Bearer not-a-token", 401, `error="invalid_token"`},
		{"tampered signature", "GET", "Bearer " + tamper(access), 401, `error="invalid_token"`},
		{"alg none", "GET", "Bearer " + algNone, 401, `error="invalid_token"`},
		{"signature of another token", "GET", "Bearer " + parts[0] + "." + parts[1] + "." + strings.Split(revoked, ".")[2], 401, `error="invalid_token"`},
		{"ID token", "GET", "Bearer " + str(tokens["id_token"]), 401, `error="invalid_token"`},
		{"refresh token", "GET", "Bearer " + str(tokens["refresh_token"]), 401, `error="invalid_token"`},
		{"revoked token", "GET", "Bearer " + revoked, 401, `error="invalid_token"`},
		{"revoked token, POST", "POST", "Bearer " + revoked, 401, `error="invalid_token"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var headers []string
			if tc.authorization != "" {
				headers = []string{"Authorization", tc.authorization}
			}
			resp := e.do(t, tc.method, "/oauth2/userinfo", nil, headers...)
			if tc.challenge == "" {
				// No credentials: the body says why, the challenge carries no error.
				if resp.Status != tc.status || str(resp.Object(t)["error"]) == "" {
					t.Errorf("%s: %d %s, want %d with a JSON error", resp.Request, resp.Status, resp.Body, tc.status)
				}
			} else {
				expectOAuthError(t, resp, tc.status, "invalid_token")
			}
			expectBearerChallenge(t, resp, tc.challenge)
		})
	}

	t.Run("PUT is 405 with Allow", func(t *testing.T) {
		t.Parallel()
		resp := e.do(t, "PUT", "/oauth2/userinfo", nil, "Authorization", "Bearer "+access)
		if resp.Status != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, OPTIONS, POST" { // OPTIONS: the CORS preflight
			t.Errorf("%s: %d Allow %q, want 405 with Allow \"GET, OPTIONS, POST\"", resp.Request, resp.Status, resp.Header.Get("Allow"))
		}
	})
	t.Run("valid token, GET and POST", func(t *testing.T) {
		t.Parallel()
		sub := str(jwtPart(t, str(tokens["id_token"]), 1)["sub"])
		e.expectUserinfo(t, access, sub)
		resp := e.do(t, "POST", "/oauth2/userinfo", nil, "Authorization", "Bearer "+access).ExpectStatus(t, http.StatusOK)
		if m := resp.Object(t); len(m) != 1 || str(m["sub"]) != sub {
			t.Errorf("POST userinfo: %s, want {\"sub\":%q}", resp.Body, sub)
		}
	})
	// 403 insufficient_scope is not covered: every authorization request and
	// every refresh must include openid, so no token without it can be had.
}

// expectRedirectedError checks that resp sends an authorization error back to the
// client: 302 to redirectURI with error code, an error_description and iss.
func expectRedirectedError(t *testing.T, resp *testserver.Response, redirectURI, code string) url.Values {
	t.Helper()
	if resp.Status != http.StatusFound {
		t.Fatalf("%s: status %d, want 302 to the client with error %s\nbody: %s", resp.Request, resp.Status, code, resp.Body)
	}
	q := callbackQuery(t, resp.Header.Get("Location"), redirectURI)
	if q.Get("error") != code || q.Get("error_description") == "" || q.Get("iss") == "" || q.Has("code") {
		t.Errorf("%s: redirect query %v, want error %s with error_description and iss, and no code", resp.Request, q, code)
	}
	return q
}
