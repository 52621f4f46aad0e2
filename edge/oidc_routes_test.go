package edge_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/core/oidc"
)

// TestDiscovery: the OpenID Connect metadata names the issuer and its endpoints
// under {issuer}/oauth2.
func TestDiscovery(t *testing.T) {
	e := newEnv(t)
	w := e.get(t, "/oauth2/.well-known/openid-configuration")
	wantStatus(t, w, http.StatusOK)
	m := decode(t, w)
	for field, want := range map[string]string{
		"issuer":                 testIssuer + "/oauth2",
		"authorization_endpoint": testIssuer + "/oauth2/authorize",
		"token_endpoint":         testIssuer + "/oauth2/token",
		"jwks_uri":               testIssuer + "/oauth2/jwks",
		"userinfo_endpoint":      testIssuer + "/oauth2/userinfo",
	} {
		if m[field] != want {
			t.Errorf("%s = %v, want %s", field, m[field], want)
		}
	}
}

// TestJWKS: the key set publishes one public key per algorithm, no private part,
// and may be cached.
func TestJWKS(t *testing.T) {
	e := newEnv(t)
	w := e.get(t, "/oauth2/jwks")
	wantStatus(t, w, http.StatusOK)
	if cc := w.Header().Get("Cache-Control"); !strings.Contains(cc, "public") {
		t.Errorf("Cache-Control = %q, want a public one", cc)
	}
	m := decode(t, w)
	list, _ := m["keys"].([]any)
	algs := map[string]bool{}
	for _, k := range list {
		jwk, _ := k.(map[string]any)
		alg, _ := jwk["alg"].(string)
		algs[alg] = true
		if jwk["kid"] == nil || jwk["d"] != nil {
			t.Errorf("key %v: want a kid and no private part", jwk)
		}
	}
	for _, alg := range []string{"RS256", "ES256", "EdDSA"} {
		if !algs[alg] {
			t.Errorf("no %s key in %s", alg, w.Body)
		}
	}
}

// TestAuthorize: a valid request answers 302 to the verify page and binds the
// browser with a __Host- cookie; POST works as GET does.
func TestAuthorize(t *testing.T) {
	e := newEnv(t)
	l := e.authorize(t, authorizeQuery())
	c := l.cookie
	if !strings.HasPrefix(c.Name, "__Host-") || !c.Secure || !c.HttpOnly || c.Path != "/" || c.SameSite != http.SameSiteLaxMode {
		t.Errorf("login cookie %+v: want __Host-, Secure, HttpOnly, Path=/, SameSite=Lax", c)
	}
	if c.MaxAge <= 0 {
		t.Errorf("login cookie MaxAge = %d, want the login's lifetime", c.MaxAge)
	}

	w := e.postForm(t, "/oauth2/authorize", authorizeQuery(), nil)
	wantStatus(t, w, http.StatusFound)
	if loc := w.Header().Get("Location"); !strings.HasPrefix(loc, testIssuer+"/oauth2/verify?auth_request_id=") {
		t.Errorf("POST authorize: Location = %q, want the verify page", loc)
	}
}

// TestAuthorizeRefusals: an unknown client or an unregistered redirect_uri is a
// 400 that never redirects; an error of a known client and redirect_uri goes back
// to the client with error and state.
func TestAuthorizeRefusals(t *testing.T) {
	e := newEnv(t)
	for _, tt := range []struct {
		name   string
		change func(url.Values)
	}{
		{"unknown client", func(q url.Values) { q.Set("client_id", "nobody") }},
		{"unregistered redirect_uri", func(q url.Values) { q.Set("redirect_uri", "https://evil.example/cb") }},
		{"no redirect_uri", func(q url.Values) { q.Del("redirect_uri") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := authorizeQuery()
			tt.change(q)
			w := e.get(t, "/oauth2/authorize?"+q.Encode())
			wantStatus(t, w, http.StatusBadRequest)
			if loc := w.Header().Get("Location"); loc != "" {
				t.Errorf("Location = %q: an unverified redirect_uri must not be followed", loc)
			}
			if len(w.Result().Cookies()) != 0 {
				t.Error("a refused request set a login cookie")
			}
			if strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
				wantOAuthError(t, w, http.StatusBadRequest, "invalid_request")
			} else {
				wantPage(t, w, http.StatusBadRequest, "")
			}
		})
	}
	for _, tt := range []struct {
		name, code string
		change     func(url.Values)
	}{
		{"scope not allowed", "invalid_scope", func(q url.Values) { q.Set("scope", "openid admin") }},
		{"plain PKCE", "invalid_request", func(q url.Values) { q.Set("code_challenge_method", "plain") }},
		{"response_type token", "unsupported_response_type", func(q url.Values) { q.Set("response_type", "token") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := authorizeQuery()
			tt.change(q)
			w := e.get(t, "/oauth2/authorize?"+q.Encode())
			wantStatus(t, w, http.StatusFound)
			loc, err := url.Parse(w.Header().Get("Location"))
			if err != nil || !strings.HasPrefix(loc.String(), testRedirect+"?") {
				t.Fatalf("Location = %q, want the client's redirect_uri", w.Header().Get("Location"))
			}
			if got := loc.Query().Get("error"); got != tt.code {
				t.Errorf("error = %q, want %s", got, tt.code)
			}
			if got := loc.Query().Get("state"); got != "st-123" {
				t.Errorf("state = %q, want st-123", got)
			}
			if loc.Query().Get("code") != "" {
				t.Error("a refused request got a code")
			}
		})
	}
	t.Run("form of the wrong type", func(t *testing.T) {
		w := e.do(t, req{method: http.MethodPost, target: "/oauth2/authorize", body: authorizeQuery().Encode(), contentType: "text/plain"})
		wantOAuthError(t, w, http.StatusBadRequest, "invalid_request")
	})
}

// TestVerifyPage: the login page shows the application and a QR code to the
// browser that started the login; its JSON view gives that browser the nonce and
// scan URL, and another browser neither; once the palm is verified it redirects
// back with the code, once only.
func TestVerifyPage(t *testing.T) {
	e := newEnv(t)
	l := e.authorize(t, authorizeQuery())
	target := "/oauth2/verify?auth_request_id=" + l.id

	w := e.do(t, req{method: http.MethodGet, target: target, cookies: []*http.Cookie{l.cookie}})
	wantPage(t, w, http.StatusOK, "Example App")
	if !strings.Contains(w.Body.String(), `id="qr"`) || !strings.Contains(w.Body.String(), "data:image/png;base64,") {
		t.Error("the login page has no QR code image")
	}

	w = e.getJSON(t, target) // another browser: no cookie
	wantStatus(t, w, http.StatusOK)
	m := decode(t, w)
	if m["nonce"] != nil || m["scanUrl"] != nil {
		t.Errorf("another browser sees the nonce or scan URL: %s", w.Body)
	}
	if m["authRequestId"] != l.id || m["status"] != "pending" || m["challengeId"] == nil || m["expiresAt"] == nil {
		t.Errorf("verify JSON = %s, want the request's pending challenge", w.Body)
	}

	w = e.do(t, req{method: http.MethodGet, target: target})
	wantPage(t, w, http.StatusForbidden, "another browser")

	id, nonce := e.challenge(t, l)
	w = e.getJSON(t, target, l.cookie)
	if m := decode(t, w); m["scanUrl"] != testIssuer+"/v1/palm/challenges/"+id+"?nonce="+nonce {
		t.Errorf("scanUrl = %v, want the challenge's scan URL", m["scanUrl"])
	}

	e.devScan(t, id, nonce, "alice")
	w = e.do(t, req{method: http.MethodHead, target: target, cookies: []*http.Cookie{l.cookie}})
	if w.Code == http.StatusFound {
		t.Fatalf("HEAD released the code: %q", w.Header().Get("Location"))
	}
	w = e.do(t, req{method: http.MethodGet, target: target, cookies: []*http.Cookie{l.cookie}})
	wantStatus(t, w, http.StatusFound)
	loc, _ := url.Parse(w.Header().Get("Location"))
	if loc == nil || loc.Query().Get("code") == "" || loc.Query().Get("state") != "st-123" {
		t.Fatalf("Location = %q, want the redirect_uri with code and state", w.Header().Get("Location"))
	}

	w = e.do(t, req{method: http.MethodGet, target: target, cookies: []*http.Cookie{l.cookie}})
	if w.Code == http.StatusFound {
		t.Fatalf("a second request of the page redirected again: %q", w.Header().Get("Location"))
	}
	wantStatus(t, w, http.StatusBadRequest)

	w = e.getJSON(t, "/oauth2/verify?auth_request_id=00000000-0000-4000-8000-000000000000")
	if w.Code < 400 || w.Code >= 500 {
		t.Errorf("an unknown auth_request_id: status %d, want a 4xx", w.Code)
	}
}

// TestVerifyDenied: a declined palm scan sends the browser back with
// access_denied and the state, and no code.
func TestVerifyDenied(t *testing.T) {
	e := newEnv(t)
	l := e.authorize(t, authorizeQuery())
	id, nonce := e.challenge(t, l)
	w := e.postJSON(t, "/v1/palm/challenges/"+id+"/deny", map[string]string{"nonce": nonce})
	wantStatus(t, w, http.StatusOK)
	if m := decode(t, w); m["status"] != "denied" {
		t.Fatalf("deny status = %v, want denied", m["status"])
	}
	w = e.do(t, req{method: http.MethodGet, target: "/oauth2/verify?auth_request_id=" + l.id, cookies: []*http.Cookie{l.cookie}})
	wantStatus(t, w, http.StatusFound)
	loc, _ := url.Parse(w.Header().Get("Location"))
	if loc == nil || loc.Query().Get("error") != "access_denied" || loc.Query().Get("state") != "st-123" || loc.Query().Get("code") != "" {
		t.Errorf("Location = %q, want access_denied with the state and no code", w.Header().Get("Location"))
	}
}

// TestTokenCodeExchange: a code and its PKCE verifier give an access token, an ID
// token and a refresh token, never cached, with client_secret_post and with
// client_secret_basic.
func TestTokenCodeExchange(t *testing.T) {
	e := newEnv(t)
	t.Run("client_secret_post", func(t *testing.T) {
		w := e.postForm(t, "/oauth2/token", codeForm(e.code(t, "alice")), nil)
		wantStatus(t, w, http.StatusOK)
		wantTokens(t, w)
	})
	t.Run("client_secret_basic", func(t *testing.T) {
		form := codeForm(e.code(t, "alice"))
		form.Del("client_id")
		form.Del("client_secret")
		w := e.postForm(t, "/oauth2/token", form, basicAuth(testClientID, testSecret))
		wantStatus(t, w, http.StatusOK)
		wantTokens(t, w)
	})
}

func wantTokens(t *testing.T, rec *recorder) {
	t.Helper()
	m := decode(t, rec)
	for _, f := range []string{"access_token", "id_token", "refresh_token"} {
		if s, _ := m[f].(string); strings.Count(s, ".") != 2 {
			t.Errorf("%s = %v, want a JWT", f, m[f])
		}
	}
	if tt, _ := m["token_type"].(string); !strings.EqualFold(tt, "Bearer") {
		t.Errorf("token_type = %v, want Bearer", m["token_type"])
	}
	if n, _ := m["expires_in"].(float64); n <= 0 {
		t.Errorf("expires_in = %v, want the access token's lifetime", m["expires_in"])
	}
	if cc := rec.Header().Get("Cache-Control"); !strings.Contains(cc, "no-store") {
		t.Errorf("Cache-Control = %q, want no-store", cc)
	}
	if p := rec.Header().Get("Pragma"); p != "no-cache" {
		t.Errorf("Pragma = %q, want no-cache", p)
	}
	if h := rec.Header().Get("X-Content-Type-Options"); h != "nosniff" {
		t.Errorf("X-Content-Type-Options = %q, want nosniff", h)
	}
	// The body is what json.Encoder writes of the response (as it was before
	// TokenResponse.AppendJSON), to the byte.
	dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
	dec.DisallowUnknownFields()
	var resp oidc.TokenResponse
	var want bytes.Buffer
	if err := dec.Decode(&resp); err != nil {
		t.Fatalf("decoding the token response: %v", err)
	}
	if err := json.NewEncoder(&want).Encode(&resp); err != nil || !bytes.Equal(rec.Body.Bytes(), want.Bytes()) {
		t.Errorf("token response body\n %q\nwant %q (json.Encoder's)", rec.Body.Bytes(), want.Bytes())
	}
}

func basicAuth(id, secret string) http.Header {
	return http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id)+":"+url.QueryEscape(secret)))}}
}

// TestTokenRefusals: each refusal of the token endpoint in the OAuth dialect: a
// wrong verifier or a used code is invalid_grant (400), a wrong secret
// invalid_client (401, with a Basic challenge when Basic was used).
func TestTokenRefusals(t *testing.T) {
	e := newEnv(t)
	t.Run("wrong PKCE verifier", func(t *testing.T) {
		form := codeForm(e.code(t, "alice"))
		form.Set("code_verifier", strings.Repeat("x", 43))
		wantOAuthError(t, e.postForm(t, "/oauth2/token", form, nil), http.StatusBadRequest, "invalid_grant")
	})
	t.Run("no PKCE verifier", func(t *testing.T) {
		form := codeForm(e.code(t, "alice"))
		form.Del("code_verifier")
		w := e.postForm(t, "/oauth2/token", form, nil)
		if w.Code != http.StatusBadRequest {
			t.Fatalf("status = %d, want 400: %s", w.Code, w.Body)
		}
	})
	t.Run("code used twice", func(t *testing.T) {
		form := codeForm(e.code(t, "alice"))
		wantStatus(t, e.postForm(t, "/oauth2/token", form, nil), http.StatusOK)
		wantOAuthError(t, e.postForm(t, "/oauth2/token", form, nil), http.StatusBadRequest, "invalid_grant")
	})
	t.Run("unknown code", func(t *testing.T) {
		wantOAuthError(t, e.postForm(t, "/oauth2/token", codeForm("not-a-code"), nil), http.StatusBadRequest, "invalid_grant")
	})
	t.Run("wrong secret, basic", func(t *testing.T) {
		form := codeForm("whatever")
		form.Del("client_id")
		form.Del("client_secret")
		w := e.postForm(t, "/oauth2/token", form, basicAuth(testClientID, "wrong-secret"))
		wantOAuthError(t, w, http.StatusUnauthorized, "invalid_client")
		if ch := w.Header().Get("WWW-Authenticate"); !strings.HasPrefix(ch, "Basic ") || !strings.Contains(ch, `realm="palmgate"`) {
			t.Errorf("WWW-Authenticate = %q, want a Basic challenge", ch)
		}
	})
	t.Run("wrong secret, post", func(t *testing.T) {
		form := codeForm("whatever")
		form.Set("client_secret", "wrong-secret")
		wantOAuthError(t, e.postForm(t, "/oauth2/token", form, nil), http.StatusUnauthorized, "invalid_client")
	})
	t.Run("unknown client", func(t *testing.T) {
		form := codeForm("whatever")
		form.Set("client_id", "nobody")
		wantOAuthError(t, e.postForm(t, "/oauth2/token", form, nil), http.StatusUnauthorized, "invalid_client")
	})
	t.Run("unsupported grant", func(t *testing.T) {
		form := codeForm("whatever")
		form.Set("grant_type", "password")
		wantOAuthError(t, e.postForm(t, "/oauth2/token", form, nil), http.StatusBadRequest, "unsupported_grant_type")
	})
	t.Run("not a form", func(t *testing.T) {
		w := e.do(t, req{method: http.MethodPost, target: "/oauth2/token", body: `{"grant_type":"authorization_code"}`, contentType: "application/json"})
		wantOAuthError(t, w, http.StatusBadRequest, "invalid_request")
	})
	t.Run("GET", func(t *testing.T) {
		w := e.get(t, "/oauth2/token")
		wantStatus(t, w, http.StatusMethodNotAllowed)
		if w.Header().Get("Allow") != "OPTIONS, POST" { // OPTIONS: the CORS preflight
			t.Errorf("Allow = %q, want OPTIONS, POST", w.Header().Get("Allow"))
		}
	})
}

// TestTokenRefresh: a refresh token gives new tokens and a new refresh token;
// the old one, used again, is invalid_grant and ends the family.
func TestTokenRefresh(t *testing.T) {
	e := newEnv(t)
	first := e.tokens(t, "alice")
	refresh := func(token string) *recorder {
		return e.postForm(t, "/oauth2/token", url.Values{
			"grant_type": {"refresh_token"}, "refresh_token": {token},
			"client_id": {testClientID}, "client_secret": {testSecret},
		}, nil)
	}
	w := refresh(first["refresh_token"].(string))
	wantStatus(t, w, http.StatusOK)
	second := decode(t, w)
	rotated, _ := second["refresh_token"].(string)
	if rotated == "" || rotated == first["refresh_token"] {
		t.Fatalf("refresh_token = %v, want a new one", second["refresh_token"])
	}
	if second["access_token"] == nil {
		t.Errorf("no access_token in %s", w.Body)
	}
	wantOAuthError(t, refresh(first["refresh_token"].(string)), http.StatusBadRequest, "invalid_grant")
	wantOAuthError(t, refresh(rotated), http.StatusBadRequest, "invalid_grant") // the family is revoked
	wantOAuthError(t, refresh("garbage"), http.StatusBadRequest, "invalid_grant")
}

// TestFormPost: with response_mode=form_post the code goes back in an
// auto-submitting form to the redirect_uri, whose origin alone the page's CSP
// lets it post to; an error of the request goes back the same way.
func TestFormPost(t *testing.T) {
	e := newEnv(t)
	q := authorizeQuery()
	q.Set("response_mode", "form_post")
	l := e.authorize(t, q)
	id, nonce := e.challenge(t, l)
	e.devScan(t, id, nonce, "alice")
	w := e.do(t, req{method: http.MethodGet, target: "/oauth2/verify?auth_request_id=" + l.id, cookies: []*http.Cookie{l.cookie}})
	wantStatus(t, w, http.StatusOK)
	if w.Header().Get("Location") != "" {
		t.Errorf("form_post answered a redirect: %q", w.Header().Get("Location"))
	}
	page := w.Body.String()
	for _, want := range []string{`action="` + testRedirect + `"`, `name="code"`, `name="state" value="st-123"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the form_post page lacks %s:\n%s", want, page)
		}
	}
	// No form-action: the client's callback may redirect on to any origin.
	wantCSP(t, w, "default-src 'none'; script-src 'sha256-8lDeP0UDwCO6/RhblgeH/ctdBzjVpJxrXizsnIk3cEQ='; base-uri 'none'; frame-ancestors https://app.example.com")

	q.Set("scope", "openid admin")
	w = e.get(t, "/oauth2/authorize?"+q.Encode())
	wantStatus(t, w, http.StatusOK)
	if !strings.Contains(w.Body.String(), `name="error" value="invalid_scope"`) {
		t.Errorf("the refused form_post request's page lacks error=invalid_scope:\n%s", w.Body)
	}
}
