package integration

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/palmgate/palmgate/internal/testserver"
)

// subRE is a pairwise subject: base64url without padding of an HMAC-SHA256.
var subRE = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// Lifetimes palmgate uses by default (DESIGN.md: access_token_ttl 1h,
// refresh_token_ttl 2160h).
const (
	defaultAccessTTL  = time.Hour
	defaultRefreshTTL = 2160 * time.Hour
)

// oidcClient is a relying party registered in the palmgate global block.
type oidcClient struct {
	id, secret, name, sector string
	redirects                []string
	// scopes it may ask for (nil: the default, openid offline_access) and
	// resources (RFC 8707) it may ask tokens for.
	scopes, resources []string
	// secretHash, when set, is configured as secret_hash instead of secret.
	secretHash string
	// postLogout are its post_logout_redirect_uri lines.
	postLogout []string
	// idTokenAlg, when set, is its id_token_signed_response_alg (else RS256).
	idTokenAlg string
	// accessAud, when set, is its access_token_audience (else base_url).
	accessAud string
	// public: a public client (no secret line); origins: its allowed_origins.
	public  bool
	origins []string
}

// testScopes are the scopes newOIDCClient's clients may ask for.
var testScopes = []string{"openid", "offline_access", "orders:read", "orders:write"}

// newOIDCClient makes a client with a random secret, two registered redirect
// URIs and testScopes; sector "" keeps the default (the client_id).
func newOIDCClient(id, sector string) oidcClient {
	secret := "secret-" + randHex(16)
	testserver.Sensitive("client secret", secret) // no log may hold it
	return oidcClient{
		id: id, secret: secret, name: "App " + id, sector: sector,
		redirects: []string{"https://" + id + ".example/callback", "https://" + id + ".example/other?tenant=7"},
		scopes:    testScopes,
	}
}

// config is the client's block for the palmgate global options.
func (c oidcClient) config() string {
	var b strings.Builder
	fmt.Fprintf(&b, "client %s {\n", c.id)
	switch {
	case c.public:
		b.WriteString("public\n")
	case c.secretHash != "":
		fmt.Fprintf(&b, "secret_hash %s\n", c.secretHash)
	default:
		fmt.Fprintf(&b, "secret %s\n", c.secret)
	}
	fmt.Fprintf(&b, "redirect_uri %s\n", strings.Join(c.redirects, " "))
	if len(c.postLogout) > 0 {
		fmt.Fprintf(&b, "post_logout_redirect_uri %s\n", strings.Join(c.postLogout, " "))
	}
	if len(c.scopes) > 0 {
		fmt.Fprintf(&b, "scopes %s\n", strings.Join(c.scopes, " "))
	}
	if len(c.resources) > 0 {
		fmt.Fprintf(&b, "resources %s\n", strings.Join(c.resources, " "))
	}
	if c.name != "" {
		fmt.Fprintf(&b, "name %q\n", c.name)
	}
	if c.sector != "" {
		fmt.Fprintf(&b, "sector %s\n", c.sector)
	}
	if c.idTokenAlg != "" {
		fmt.Fprintf(&b, "id_token_signed_response_alg %s\n", c.idTokenAlg)
	}
	if c.accessAud != "" {
		fmt.Fprintf(&b, "access_token_audience %s\n", c.accessAud)
	}
	if len(c.origins) > 0 {
		fmt.Fprintf(&b, "allowed_origins %s\n", strings.Join(c.origins, " "))
	}
	b.WriteString("}\n")
	return b.String()
}

// startOIDC starts a dev-mode palmgate with clients and extra global lines.
// The per-IP rate limit is off: these tests send many requests from one address
// and are not about it.
func startOIDC(t *testing.T, clients []oidcClient, extra ...string) *env {
	t.Helper()
	lines := append([]string{"rate_limit off"}, extra...)
	for _, c := range clients {
		lines = append(lines, c.config())
	}
	return start(t, testserver.Options{Global: strings.Join(lines, "\n")})
}

// authURL is an authorization request of client c: response_type code, the
// first redirect URI, scope "openid offline_access", a random state and nonce,
// then params (a value "" removes the parameter).
func (e *env) authURL(c oidcClient, params ...string) string {
	q := url.Values{
		"response_type": {"code"}, "client_id": {c.id}, "redirect_uri": {c.redirects[0]},
		"scope": {"openid offline_access"}, "state": {"st-" + randHex(8)}, "nonce": {"n-" + randHex(8)},
	}
	for i := 0; i+1 < len(params); i += 2 {
		if params[i+1] == "" {
			q.Del(params[i])
		} else {
			q.Set(params[i], params[i+1])
		}
	}
	return e.URL + "/oauth2/authorize?" + q.Encode()
}

// loginPage is the JSON form of the login page.
type loginPage struct {
	AuthRequestID string `json:"authRequestId"`
	ChallengeID   string `json:"challengeId"`
	Nonce         string `json:"nonce"`
	ScanURL       string `json:"scanUrl"`
	ScanExpiresAt string `json:"scanExpiresAt"`
	Status        string `json:"status"`
	ExpiresAt     string `json:"expiresAt"`
}

func (e *env) verifyURL(id string) string {
	return e.URL + "/oauth2/verify?auth_request_id=" + id
}

// authorize sends an authorization request and expects the 302 to the login
// page; it returns the auth_request_id.
func (e *env) authorize(t *testing.T, authURL string) string {
	t.Helper()
	resp := e.do(t, "GET", authURL, nil)
	if resp.Status != http.StatusFound {
		t.Fatalf("%s: status %d, want 302 to the login page\nbody: %s", resp.Request, resp.Status, testserver.Snippet(resp.Body))
	}
	loc := resp.Header.Get("Location")
	id, ok := strings.CutPrefix(loc, e.URL+"/oauth2/verify?auth_request_id=")
	if !ok || !uuidRE.MatchString(id) {
		t.Fatalf("%s: Location %q, want %s/oauth2/verify?auth_request_id=<uuid>", resp.Request, loc, e.URL)
	}
	return id
}

// loginPageJSON reads the login page of an authorization request as JSON and
// checks its shape.
func (e *env) loginPageJSON(t *testing.T, id string) loginPage {
	t.Helper()
	resp := e.do(t, "GET", e.verifyURL(id), nil, "Accept", "application/json").ExpectStatus(t, http.StatusOK)
	var p loginPage
	resp.Decode(t, &p)
	if p.AuthRequestID != id {
		t.Errorf("login page: authRequestId %q, want %q", p.AuthRequestID, id)
	}
	if !uuidRE.MatchString(p.ChallengeID) {
		t.Fatalf("login page: challengeId %q is not a uuid: %s", p.ChallengeID, resp.Body)
	}
	if !nonceRE.MatchString(p.Nonce) {
		t.Errorf("login page: nonce %q is not base64url of 128 bits or more", p.Nonce)
	}
	if want := e.URL + "/v1/palm/challenges/" + p.ChallengeID + "?nonce=" + url.QueryEscape(p.Nonce); p.ScanURL != want {
		t.Errorf("login page: scanUrl %q, want %q", p.ScanURL, want)
	}
	if !timeRE.MatchString(p.ExpiresAt) {
		t.Errorf("login page: expiresAt %q is not RFC 3339 UTC with milliseconds", p.ExpiresAt)
	}
	return p
}

// scan completes the login's palm challenge with a dev-mode scan of subject.
func (e *env) scan(t *testing.T, p loginPage, subject string) {
	t.Helper()
	resp := e.devScan(t, challengeInfo{ChallengeID: p.ChallengeID, Nonce: p.Nonce}, subject).ExpectStatus(t, http.StatusOK)
	if m := resp.Object(t); str(m["status"]) != "verified" {
		t.Fatalf("dev-scan: %s, want status verified", resp.Body)
	}
}

// finish loads the login page of an ended challenge and expects the 302 back
// to redirectURI; it returns the callback's query. The request is answered
// once: a second load must be 400.
func (e *env) finish(t *testing.T, id, redirectURI string) url.Values {
	t.Helper()
	resp := e.do(t, "GET", e.verifyURL(id), nil)
	if resp.Status != http.StatusFound {
		t.Fatalf("%s: status %d, want 302 to the client\nbody: %s", resp.Request, resp.Status, testserver.Snippet(resp.Body))
	}
	q := callbackQuery(t, resp.Header.Get("Location"), redirectURI)
	expectOAuthError(t, e.do(t, "GET", e.verifyURL(id), nil), http.StatusBadRequest, "invalid_request")
	return q
}

// callbackQuery parses a redirect to redirectURI and returns its query without
// the parameters redirectURI itself carries (which must be kept).
func callbackQuery(t *testing.T, location, redirectURI string) url.Values {
	t.Helper()
	got, err := url.Parse(location)
	if err != nil {
		t.Fatalf("Location %q: %v", location, err)
	}
	want, _ := url.Parse(redirectURI)
	if got.Scheme != want.Scheme || got.Host != want.Host || got.Path != want.Path || got.Fragment != "" {
		t.Fatalf("Location %q, want a redirect to %q", location, redirectURI)
	}
	q := got.Query()
	for k, v := range want.Query() {
		if !slices.Equal(q[k], v) {
			t.Errorf("Location %q lost the redirect_uri's own parameter %s=%v", location, k, v)
		}
		delete(q, k)
	}
	return q
}

// login runs a whole login through the raw endpoints: authorize, the scan of
// subject, the redirect back. It returns the callback's query.
func (e *env) login(t *testing.T, authURL, subject, redirectURI string) url.Values {
	t.Helper()
	id := e.authorize(t, authURL)
	p := e.loginPageJSON(t, id)
	if p.Status != "pending" {
		t.Fatalf("login page: status %q before the scan, want pending", p.Status)
	}
	e.scan(t, p, subject)
	return e.finish(t, id, redirectURI)
}

// codeFor logs subject in at client c (first redirect URI, scope
// "openid offline_access") and returns the code; with pkce the request carries
// an S256 challenge and verifier is its verifier.
func (e *env) codeFor(t *testing.T, c oidcClient, subject string, pkce bool) (code, verifier string) {
	t.Helper()
	var params []string
	if pkce {
		verifier = oauth2.GenerateVerifier()
		params = []string{"code_challenge", oauth2.S256ChallengeFromVerifier(verifier), "code_challenge_method", "S256"}
	}
	authURL := e.authURL(c, append(params, "state", "st-code")...)
	q := e.login(t, authURL, subject, c.redirects[0])
	if q.Get("state") != "st-code" || q.Get("code") == "" || q.Get("iss") != e.URL+"/oauth2" || len(q) != 3 {
		t.Fatalf("callback query %v, want exactly code, state=st-code and iss (RFC 9207)", q)
	}
	return q.Get("code"), verifier
}

// postToken posts a form to the token endpoint.
func (e *env) postToken(t *testing.T, form url.Values, headers ...string) *testserver.Response {
	t.Helper()
	return e.do(t, "POST", "/oauth2/token", form.Encode(), append([]string{"Content-Type", "application/x-www-form-urlencoded"}, headers...)...)
}

// exchange redeems a code of client c with client_secret_post and expects 200.
func (e *env) exchange(t *testing.T, c oidcClient, code, verifier string) map[string]any {
	t.Helper()
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {c.redirects[0]},
		"client_id": {c.id}, "client_secret": {c.secret}}
	if verifier != "" {
		form.Set("code_verifier", verifier)
	}
	resp := e.postToken(t, form).ExpectStatus(t, http.StatusOK)
	m := resp.Object(t)
	if str(m["access_token"]) == "" || str(m["id_token"]) == "" || str(m["token_type"]) != "Bearer" {
		t.Fatalf("token response %s: want access_token, id_token and token_type Bearer", resp.Body)
	}
	return m
}

// basicAuth is the Authorization header of client_secret_basic (RFC 6749
// 2.3.1: form-encoded id and secret).
func basicAuth(id, secret string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id)+":"+url.QueryEscape(secret)))
}

// userinfo calls the userinfo endpoint with a bearer token.
func (e *env) userinfo(t *testing.T, accessToken string) *testserver.Response {
	t.Helper()
	return e.do(t, "GET", "/oauth2/userinfo", nil, "Authorization", "Bearer "+accessToken)
}

// expectUserinfo expects userinfo to answer exactly {"sub": sub} for the token.
func (e *env) expectUserinfo(t *testing.T, accessToken, sub string) {
	t.Helper()
	resp := e.userinfo(t, accessToken).ExpectStatus(t, http.StatusOK)
	if m := resp.Object(t); len(m) != 1 || str(m["sub"]) != sub {
		t.Errorf("userinfo: %s, want exactly {\"sub\":%q}", resp.Body, sub)
	}
}

// expectRevoked expects userinfo to refuse the token as invalid_token.
func (e *env) expectRevoked(t *testing.T, accessToken string) {
	t.Helper()
	resp := e.userinfo(t, accessToken)
	expectOAuthError(t, resp, http.StatusUnauthorized, "invalid_token")
	expectBearerChallenge(t, resp, `error="invalid_token"`)
}

// expectBearerChallenge checks a WWW-Authenticate Bearer challenge of realm
// palmgate: with want "" it must carry no error; otherwise it must contain want.
func expectBearerChallenge(t *testing.T, resp *testserver.Response, want string) {
	t.Helper()
	h := resp.Header.Values("WWW-Authenticate")
	if len(h) != 1 || !strings.HasPrefix(h[0], `Bearer realm="palmgate"`) {
		t.Errorf("%s: WWW-Authenticate %q, want one Bearer challenge of realm palmgate", resp.Request, h)
		return
	}
	switch {
	case want == "" && h[0] != `Bearer realm="palmgate"`:
		t.Errorf("%s: WWW-Authenticate %q, want exactly Bearer realm=\"palmgate\" (no error without credentials, RFC 6750 3.1)", resp.Request, h[0])
	case want != "" && !strings.Contains(h[0], want):
		t.Errorf("%s: WWW-Authenticate %q, want it to contain %s", resp.Request, h[0], want)
	}
}

// expectOAuthError checks an RFC 6749 error answer: the status, a JSON body
// {"error": code, "error_description": non-empty} and no redirect.
func expectOAuthError(t *testing.T, r *testserver.Response, status int, code string) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Errorf("%s: status %d, want %d (error %q)\nbody: %s", r.Request, r.Status, status, code, testserver.Snippet(r.Body))
	}
	if loc := r.Header.Get("Location"); loc != "" {
		t.Errorf("%s: Location %q, want no redirect", r.Request, loc)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: Content-Type %q, want application/json", r.Request, ct)
	}
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Errorf("%s: body is not a JSON object: %v\nbody: %s", r.Request, err, testserver.Snippet(r.Body))
		return nil
	}
	if got := str(m["error"]); got != code {
		t.Errorf("%s: error %q, want %q\nbody: %s", r.Request, got, code, testserver.Snippet(r.Body))
	}
	if str(m["error_description"]) == "" {
		t.Errorf("%s: no error_description: %s", r.Request, testserver.Snippet(r.Body))
	}
	return m
}

// jwtPart decodes the header (0) or the payload (1) of a compact JWS.
func jwtPart(t *testing.T, token string, i int) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token %.40q... is not a compact JWS", token)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[i])
	if err != nil {
		t.Fatalf("token part %d: %v", i, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("token part %d: %v", i, err)
	}
	return m
}

// relyingParty is a client application built on go-oidc and x/oauth2.
type relyingParty struct {
	client   oidcClient
	issuer   string
	ctx      context.Context
	provider *oidc.Provider
	conf     oauth2.Config
	verifier *oidc.IDTokenVerifier
}

// rpHTTP is the relying party's HTTP client.
var rpHTTP = &http.Client{Timeout: 20 * time.Second}

// newRelyingParty discovers the provider and configures client c with
// authentication style style and scopes.
func newRelyingParty(t *testing.T, e *env, c oidcClient, style oauth2.AuthStyle, scopes ...string) *relyingParty {
	t.Helper()
	ctx := oidc.ClientContext(context.Background(), rpHTTP)
	ctx = context.WithValue(ctx, oauth2.HTTPClient, rpHTTP)
	provider, err := oidc.NewProvider(ctx, e.URL+"/oauth2")
	if err != nil {
		t.Fatalf("oidc.NewProvider(%s/oauth2): %v", e.URL, err)
	}
	endpoint := provider.Endpoint()
	endpoint.AuthStyle = style
	return &relyingParty{
		client: c, issuer: e.URL + "/oauth2", ctx: ctx, provider: provider,
		conf: oauth2.Config{
			ClientID: c.id, ClientSecret: c.secret, Endpoint: endpoint,
			RedirectURL: c.redirects[0], Scopes: scopes,
		},
		verifier: provider.Verifier(&oidc.Config{ClientID: c.id}),
	}
}

// rpLogin is a finished login at the relying party: the code and what the
// relying party kept for it.
type rpLogin struct {
	code, state, nonce, verifier string
	scanned                      time.Time // when the palm was scanned
}

// login runs a login of subject from AuthCodeURL (state, nonce, S256 PKCE) to
// the code at the callback.
func (rp *relyingParty) login(t *testing.T, e *env, subject string) rpLogin {
	t.Helper()
	l := rpLogin{state: "state-" + randHex(12), nonce: "nonce-" + randHex(12), verifier: oauth2.GenerateVerifier()}
	authURL := rp.conf.AuthCodeURL(l.state, oidc.Nonce(l.nonce), oauth2.S256ChallengeOption(l.verifier))
	id := e.authorize(t, authURL)
	p := e.loginPageJSON(t, id)
	if p.Status != "pending" {
		t.Fatalf("login page: status %q before the scan, want pending", p.Status)
	}
	l.scanned = time.Now()
	e.scan(t, p, subject)
	q := e.finish(t, id, rp.conf.RedirectURL)
	if q.Get("state") != l.state || q.Get("code") == "" || q.Get("iss") != e.URL+"/oauth2" || len(q) != 3 {
		t.Fatalf("callback query %v, want exactly a code, state %q and iss (RFC 9207)", q, l.state)
	}
	l.code = q.Get("code")
	return l
}

// idClaims are the ID token claims beyond go-oidc's IDToken fields.
type idClaims struct {
	AuthTime int64    `json:"auth_time"`
	AMR      []string `json:"amr"`
	AZP      string   `json:"azp"`
	SID      string   `json:"sid"`
	Nonce    *string  `json:"nonce"`
}

// verifyIDToken verifies the token response's id_token with the provider's
// JWKS and checks the claims palmgate promises. nonce "" means the token must
// carry none (a refresh).
func (rp *relyingParty) verifyIDToken(t *testing.T, tok *oauth2.Token, nonce string, authTime time.Time) (*oidc.IDToken, idClaims) {
	t.Helper()
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		t.Fatalf("token response has no id_token")
	}
	idt, err := rp.verifier.Verify(rp.ctx, raw)
	if err != nil {
		t.Fatalf("verifying the ID token with the JWKS: %v", err)
	}
	var c idClaims
	if err := idt.Claims(&c); err != nil {
		t.Fatal(err)
	}
	if h, want := jwtPart(t, raw, 0), cmp.Or(rp.client.idTokenAlg, "RS256"); h["alg"] != want || str(h["kid"]) == "" {
		t.Errorf("ID token header %v, want alg %s and a kid", h, want)
	}
	if idt.Issuer != rp.issuer {
		t.Errorf("ID token iss %q, want %q", idt.Issuer, rp.issuer)
	}
	if !slices.Equal(idt.Audience, []string{rp.client.id}) || c.AZP != rp.client.id {
		t.Errorf("ID token aud %v azp %q, want [%s]", idt.Audience, c.AZP, rp.client.id)
	}
	if !subRE.MatchString(idt.Subject) {
		t.Errorf("ID token sub %q is not a pairwise subject (base64url HMAC-SHA256)", idt.Subject)
	}
	if nonce != "" && idt.Nonce != nonce {
		t.Errorf("ID token nonce %q, want %q", idt.Nonce, nonce)
	}
	if nonce == "" && c.Nonce != nil {
		t.Errorf("refreshed ID token carries nonce %q, want none", *c.Nonce)
	}
	if !slices.Equal(c.AMR, []string{"palm"}) {
		t.Errorf("ID token amr %v, want [palm]", c.AMR)
	}
	// The scan began at authTime and ended before now; the token was issued
	// after it, and arrived before now: however long each step took.
	now := time.Now()
	between(t, "ID token auth_time", time.Unix(c.AuthTime, 0), authTime, now, time.Second)
	if !uuidRE.MatchString(c.SID) {
		t.Errorf("ID token sid %q, want the grant's uuid", c.SID)
	}
	between(t, "ID token iat", idt.IssuedAt, authTime, now, time.Second)
	return idt, c
}

// expectAccessToken verifies an access token with the provider's JWKS as an
// RFC 9068 token (ES256, typ at+jwt) for sub, sid and scope, and checks its
// claims.
func (rp *relyingParty) expectAccessToken(t *testing.T, e *env, token, sub, sid, scope string) {
	t.Helper()
	v := rp.provider.Verifier(&oidc.Config{ClientID: e.URL, SupportedSigningAlgs: []string{oidc.ES256}})
	if _, err := v.Verify(rp.ctx, token); err != nil {
		t.Fatalf("verifying the access token (ES256, aud %s) with the JWKS: %v", e.URL, err)
	}
	if h := jwtPart(t, token, 0); h["typ"] != "at+jwt" || h["alg"] != "ES256" {
		t.Errorf("access token header %v, want typ at+jwt and alg ES256", h)
	}
	c := jwtPart(t, token, 1)
	if c["sub"] != sub || c["client_id"] != rp.client.id || c["scope"] != scope || c["sid"] != sid || c["iss"] != e.URL+"/oauth2" {
		t.Errorf("access token claims %v, want sub %q client_id %q scope %q sid %q", c, sub, rp.client.id, scope, sid)
	}
	if !uuidRE.MatchString(str(c["jti"])) {
		t.Errorf("access token jti %v, want a uuid", c["jti"])
	}
	iat, _ := c["iat"].(float64)
	exp, _ := c["exp"].(float64)
	if time.Duration(exp-iat)*time.Second != defaultAccessTTL {
		t.Errorf("access token lives %vs, want %v", exp-iat, defaultAccessTTL)
	}
	if _, ok := c["auth_time"].(float64); !ok {
		t.Errorf("access token has no auth_time: %v", c)
	}
}

// expectRetrieveError checks an error of x/oauth2 from the token endpoint.
func expectRetrieveError(t *testing.T, err error, status int, code string) *oauth2.RetrieveError {
	t.Helper()
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		t.Fatalf("token request: error %v, want an OAuth error %d %s", err, status, code)
	}
	if re.Response.StatusCode != status || re.ErrorCode != code || re.ErrorDescription == "" {
		t.Errorf("token request: %d %q (%q), want %d %q with a description; body %s",
			re.Response.StatusCode, re.ErrorCode, re.ErrorDescription, status, code, re.Body)
	}
	return re
}

// forceRefresh refreshes refreshToken through x/oauth2's TokenSource (an
// expired token makes it refresh at once).
func (rp *relyingParty) forceRefresh(refreshToken string) (*oauth2.Token, error) {
	return rp.conf.TokenSource(rp.ctx, &oauth2.Token{RefreshToken: refreshToken, Expiry: time.Now().Add(-time.Hour)}).Token()
}

// expectTokenFields checks the token response's fields of the spec's table.
func expectTokenFields(t *testing.T, tok *oauth2.Token, scope string, refresh bool) {
	t.Helper()
	if tok.TokenType != "Bearer" || tok.AccessToken == "" {
		t.Errorf("token_type %q access_token %q, want Bearer and a token", tok.TokenType, tok.AccessToken)
	}
	if n, _ := tok.Extra("expires_in").(float64); time.Duration(n)*time.Second != defaultAccessTTL {
		t.Errorf("expires_in %v, want %d", tok.Extra("expires_in"), int(defaultAccessTTL.Seconds()))
	}
	if got := tok.Extra("scope"); got != scope {
		t.Errorf("scope %v, want %q", got, scope)
	}
	n, _ := tok.Extra("refresh_token_expires_in").(float64)
	switch {
	case refresh && tok.RefreshToken == "":
		t.Errorf("no refresh_token, want one with scope offline_access")
	case refresh && (time.Duration(n)*time.Second > defaultRefreshTTL || time.Duration(n)*time.Second < defaultRefreshTTL-time.Minute):
		t.Errorf("refresh_token_expires_in %v, want about %d", tok.Extra("refresh_token_expires_in"), int(defaultRefreshTTL.Seconds()))
	case !refresh && (tok.RefreshToken != "" || tok.Extra("refresh_token_expires_in") != nil):
		t.Errorf("refresh_token %q (expires_in %v) without offline_access, want none", tok.RefreshToken, tok.Extra("refresh_token_expires_in"))
	}
}
