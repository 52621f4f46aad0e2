package integration

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"html"
	"image/png"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/palmgate/palmgate/internal/testserver"
)

// TestOIDCRelyingParty logs in with a real relying-party stack (go-oidc for
// discovery, JWKS and ID token verification; x/oauth2 for the code flow,
// PKCE and refresh) against the palmgate binary.
func TestOIDCRelyingParty(t *testing.T) {
	t.Parallel()
	app, other := newOIDCClient("shop", ""), newOIDCClient("forum", "")
	e := startOIDC(t, []oidcClient{app, other})

	t.Run("discovery", func(t *testing.T) {
		t.Parallel()
		rp := newRelyingParty(t, e, app, oauth2.AuthStyleInParams, oidc.ScopeOpenID)
		var d struct {
			Issuer       string   `json:"issuer"`
			JWKS         string   `json:"jwks_uri"`
			Userinfo     string   `json:"userinfo_endpoint"`
			Subjects     []string `json:"subject_types_supported"`
			IDTokenAlgs  []string `json:"id_token_signing_alg_values_supported"`
			AuthMethods  []string `json:"token_endpoint_auth_methods_supported"`
			PKCEMethods  []string `json:"code_challenge_methods_supported"`
			GrantTypes   []string `json:"grant_types_supported"`
			ResponseType []string `json:"response_types_supported"`
		}
		if err := rp.provider.Claims(&d); err != nil {
			t.Fatal(err)
		}
		iss := e.URL + "/oauth2"
		ep := rp.provider.Endpoint()
		if d.Issuer != iss || ep.AuthURL != iss+"/authorize" || ep.TokenURL != iss+"/token" ||
			d.Userinfo != iss+"/userinfo" || d.JWKS != iss+"/jwks" {
			t.Errorf("discovery endpoints %+v %+v, want them under %s", d, ep, iss)
		}
		if strings.Join(d.Subjects, ",") != "pairwise" || strings.Join(d.IDTokenAlgs, ",") != "RS256,ES256,EdDSA" ||
			strings.Join(d.PKCEMethods, ",") != "S256" || strings.Join(d.ResponseType, ",") != "code" ||
			strings.Join(d.AuthMethods, ",") != "client_secret_post,client_secret_basic,none" || // none: public clients
			strings.Join(d.GrantTypes, ",") != "authorization_code,refresh_token,urn:ietf:params:oauth:grant-type:jwt-bearer" {
			t.Errorf("discovery metadata %+v", d)
		}
		m := e.do(t, "GET", "/oauth2/jwks", nil).ExpectStatus(t, http.StatusOK).Object(t)
		algs := map[string]bool{}
		for _, k := range m["keys"].([]any) {
			jwk := k.(map[string]any)
			algs[str(jwk["alg"])] = true
			if str(jwk["kid"]) == "" || jwk["d"] != nil || jwk["p"] != nil {
				t.Errorf("JWKS key %v: want a kid and no private part", jwk)
			}
		}
		if !algs["RS256"] || !algs["ES256"] || !algs["EdDSA"] {
			t.Errorf("JWKS algorithms %v, want RS256, ES256 and EdDSA keys", algs)
		}
	})

	t.Run("login page HTML", func(t *testing.T) {
		t.Parallel()
		id := e.authorize(t, e.authURL(app, "scope", "openid orders:read"))
		resp := e.do(t, "GET", e.verifyURL(id), nil).ExpectStatus(t, http.StatusOK)
		body := string(resp.Body)
		if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Errorf("login page Content-Type %q, want text/html; charset=utf-8", ct)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("login page CSP %q, want default-src 'none'", csp)
		}
		for _, want := range []string{"<title>Sign in with your palm · palmgate</title>", "<b>App shop</b>", "orders:read", "Simulate palm scan", "setInterval(poll, 2000)"} {
			if !strings.Contains(body, want) {
				t.Errorf("login page lacks %q", want)
			}
		}
		m := regexp.MustCompile(`<img[^>]* id="qr"[^>]* src="data:image/png;base64,([^"]+)"`).FindStringSubmatch(body)
		if m == nil {
			i := max(strings.Index(body, "<main>"), 0)
			t.Fatalf("login page has no QR <img id=qr> with a PNG data URI:\n%s", testserver.Snippet([]byte(body[i:])))
		}
		raw, err := base64.StdEncoding.DecodeString(html.UnescapeString(m[1]))
		if err != nil {
			t.Fatalf("QR data URI: %v", err)
		}
		img, err := png.Decode(bytes.NewReader(raw))
		if err != nil || img.Bounds().Dx() < 100 || img.Bounds().Dx() != img.Bounds().Dy() {
			t.Errorf("QR image: %v, bounds %v; want a square PNG of at least 100 px", err, img)
		}
		p := e.loginPageJSON(t, id)
		text, err := testserver.DecodeQR(img)
		if err != nil || p.Status != "pending" || text != p.ScanURL {
			t.Errorf("login page (status %q): QR code encodes %q (%v), want the scan URL %q", p.Status, text, err, p.ScanURL)
		}
		if link := e.appLink(t, e.verifyURL(id)); link != p.ScanURL {
			t.Errorf("login page on a phone links %q, want the scan URL %q", link, p.ScanURL)
		}
	})

	t.Run("client_secret_post, PKCE, refresh rotation and reuse detection", func(t *testing.T) {
		t.Parallel()
		rp := newRelyingParty(t, e, app, oauth2.AuthStyleInParams, oidc.ScopeOpenID, oidc.ScopeOfflineAccess)
		l := rp.login(t, e, e.subject("alice"))
		tok, err := rp.conf.Exchange(rp.ctx, l.code, oauth2.VerifierOption(l.verifier))
		if err != nil {
			t.Fatalf("Exchange (client_secret_post, PKCE S256): %v", err)
		}
		expectTokenFields(t, tok, "offline_access openid", true)
		idt, claims := rp.verifyIDToken(t, tok, l.nonce, l.scanned)
		rp.expectAccessToken(t, e, tok.AccessToken, idt.Subject, claims.SID, "offline_access openid")
		if err := idt.VerifyAccessToken(tok.AccessToken); err != nil && idt.AccessTokenHash != "" {
			t.Errorf("at_hash does not match the access token: %v", err)
		}
		if h := jwtPart(t, tok.RefreshToken, 0); h["typ"] != "rt+jwt" || h["alg"] != "ES256" {
			t.Errorf("refresh token header %v, want typ rt+jwt and alg ES256", h)
		}
		ui, err := rp.provider.UserInfo(rp.ctx, oauth2.StaticTokenSource(tok))
		if err != nil {
			t.Fatalf("provider.UserInfo: %v", err)
		}
		if ui.Subject != idt.Subject {
			t.Errorf("userinfo sub %q, ID token sub %q: want equal", ui.Subject, idt.Subject)
		}
		e.expectUserinfo(t, tok.AccessToken, idt.Subject)

		// Each refresh rotates: new refresh, access and ID tokens, same subject,
		// the original auth_time, and no nonce.
		refreshes := []*oauth2.Token{tok}
		for i := 1; i <= 2; i++ {
			time.Sleep(1100 * time.Millisecond) // a new iat
			prev := refreshes[i-1]
			next, err := rp.forceRefresh(prev.RefreshToken)
			if err != nil {
				t.Fatalf("refresh %d: %v", i, err)
			}
			expectTokenFields(t, next, "offline_access openid", true)
			if next.RefreshToken == prev.RefreshToken || next.AccessToken == prev.AccessToken {
				t.Fatalf("refresh %d did not rotate: same refresh or access token", i)
			}
			rid, rc := rp.verifyIDToken(t, next, "", time.Unix(claims.AuthTime, 0))
			if rid.Subject != idt.Subject || rc.SID != claims.SID || !rid.IssuedAt.After(idt.IssuedAt) {
				t.Errorf("refreshed ID token sub %q sid %q iat %v, want sub %q sid %q and a fresh iat after %v",
					rid.Subject, rc.SID, rid.IssuedAt, idt.Subject, claims.SID, idt.IssuedAt)
			}
			rp.expectAccessToken(t, e, next.AccessToken, idt.Subject, claims.SID, "offline_access openid")
			e.expectUserinfo(t, next.AccessToken, idt.Subject)
			refreshes = append(refreshes, next)
		}

		// Reusing the first (rotated) refresh token is refused and revokes the
		// family: the newest refresh token and the access tokens stop working.
		_, err = rp.forceRefresh(refreshes[0].RefreshToken)
		expectRetrieveError(t, err, http.StatusBadRequest, "invalid_grant")
		_, err = rp.forceRefresh(refreshes[2].RefreshToken)
		expectRetrieveError(t, err, http.StatusBadRequest, "invalid_grant")
		for _, r := range refreshes {
			e.expectRevoked(t, r.AccessToken)
		}
	})

	t.Run("client_secret_basic without offline_access", func(t *testing.T) {
		t.Parallel()
		rp := newRelyingParty(t, e, app, oauth2.AuthStyleInHeader, oidc.ScopeOpenID)
		l := rp.login(t, e, e.subject("bob"))
		tok, err := rp.conf.Exchange(rp.ctx, l.code, oauth2.VerifierOption(l.verifier))
		if err != nil {
			t.Fatalf("Exchange (client_secret_basic): %v", err)
		}
		expectTokenFields(t, tok, "openid", false)
		idt, claims := rp.verifyIDToken(t, tok, l.nonce, l.scanned)
		rp.expectAccessToken(t, e, tok.AccessToken, idt.Subject, claims.SID, "openid")
		ui, err := rp.provider.UserInfo(rp.ctx, oauth2.StaticTokenSource(tok))
		if err != nil || ui.Subject != idt.Subject {
			t.Errorf("provider.UserInfo: %v, sub %v; want sub %q", err, ui, idt.Subject)
		}
	})

	t.Run("PKCE with a wrong or missing verifier is invalid_grant", func(t *testing.T) {
		t.Parallel()
		rp := newRelyingParty(t, e, app, oauth2.AuthStyleInParams, oidc.ScopeOpenID)
		l := rp.login(t, e, e.subject("carol"))
		_, err := rp.conf.Exchange(rp.ctx, l.code, oauth2.VerifierOption(oauth2.GenerateVerifier()))
		expectRetrieveError(t, err, http.StatusBadRequest, "invalid_grant")
		_, err = rp.conf.Exchange(rp.ctx, l.code)
		expectRetrieveError(t, err, http.StatusBadRequest, "invalid_grant")
	})

	t.Run("a reused code is refused and revokes the first exchange's tokens", func(t *testing.T) {
		t.Parallel()
		rp := newRelyingParty(t, e, app, oauth2.AuthStyleInParams, oidc.ScopeOpenID, oidc.ScopeOfflineAccess)
		l := rp.login(t, e, e.subject("dave"))
		tok, err := rp.conf.Exchange(rp.ctx, l.code, oauth2.VerifierOption(l.verifier))
		if err != nil {
			t.Fatalf("first Exchange: %v", err)
		}
		idt, _ := rp.verifyIDToken(t, tok, l.nonce, l.scanned)
		e.expectUserinfo(t, tok.AccessToken, idt.Subject)
		_, err = rp.conf.Exchange(rp.ctx, l.code, oauth2.VerifierOption(l.verifier))
		expectRetrieveError(t, err, http.StatusBadRequest, "invalid_grant")
		e.expectRevoked(t, tok.AccessToken)
		_, err = rp.forceRefresh(tok.RefreshToken)
		expectRetrieveError(t, err, http.StatusBadRequest, "invalid_grant")
	})

	t.Run("a wrong client secret is 401 invalid_client and leaves the code usable", func(t *testing.T) {
		t.Parallel()
		rp := newRelyingParty(t, e, app, oauth2.AuthStyleInParams, oidc.ScopeOpenID)
		l := rp.login(t, e, e.subject("erin"))
		for _, style := range []oauth2.AuthStyle{oauth2.AuthStyleInParams, oauth2.AuthStyleInHeader} {
			bad := rp.conf
			bad.ClientSecret = app.secret + "x"
			bad.Endpoint.AuthStyle = style
			_, err := bad.Exchange(rp.ctx, l.code, oauth2.VerifierOption(l.verifier))
			re := expectRetrieveError(t, err, http.StatusUnauthorized, "invalid_client")
			if h := re.Response.Header.Get("WWW-Authenticate"); style == oauth2.AuthStyleInHeader && !strings.HasPrefix(h, "Basic ") {
				t.Errorf("401 to client_secret_basic: WWW-Authenticate %q, want a Basic challenge (RFC 6749 5.2)", h)
			}
		}
		tok, err := rp.conf.Exchange(rp.ctx, l.code, oauth2.VerifierOption(l.verifier))
		if err != nil {
			t.Fatalf("Exchange with the right secret after failed client authentication: %v", err)
		}
		rp.verifyIDToken(t, tok, l.nonce, l.scanned)
	})

	t.Run("redirect_uri at the token endpoint must match the authorization request", func(t *testing.T) {
		t.Parallel()
		rp := newRelyingParty(t, e, app, oauth2.AuthStyleInParams, oidc.ScopeOpenID)
		l := rp.login(t, e, e.subject("frank"))
		wrong := rp.conf
		wrong.RedirectURL = app.redirects[1] // registered, but not the request's
		_, err := wrong.Exchange(rp.ctx, l.code, oauth2.VerifierOption(l.verifier))
		expectRetrieveError(t, err, http.StatusBadRequest, "invalid_grant")
		wrong.RedirectURL = ""
		_, err = wrong.Exchange(rp.ctx, l.code, oauth2.VerifierOption(l.verifier))
		expectRetrieveError(t, err, http.StatusBadRequest, "invalid_request")
	})

	t.Run("a code is bound to its client", func(t *testing.T) {
		t.Parallel()
		rp := newRelyingParty(t, e, app, oauth2.AuthStyleInParams, oidc.ScopeOpenID)
		l := rp.login(t, e, e.subject("grace"))
		thief := newRelyingParty(t, e, other, oauth2.AuthStyleInParams, oidc.ScopeOpenID)
		thief.conf.RedirectURL = app.redirects[0]
		_, err := thief.conf.Exchange(thief.ctx, l.code, oauth2.VerifierOption(l.verifier))
		expectRetrieveError(t, err, http.StatusBadRequest, "invalid_grant")
	})

	// Issue 9, finding 8: the reuse rule must not let another client revoke a grant.
	t.Run("a used code presented by another client revokes nothing", func(t *testing.T) {
		t.Parallel()
		rp := newRelyingParty(t, e, app, oauth2.AuthStyleInParams, oidc.ScopeOpenID, oidc.ScopeOfflineAccess)
		l := rp.login(t, e, e.subject("heidi"))
		tok, err := rp.conf.Exchange(rp.ctx, l.code, oauth2.VerifierOption(l.verifier))
		if err != nil {
			t.Fatalf("Exchange: %v", err)
		}
		idt, _ := rp.verifyIDToken(t, tok, l.nonce, l.scanned)
		other := newRelyingParty(t, e, other, oauth2.AuthStyleInHeader, oidc.ScopeOpenID)
		for _, redirect := range []string{other.conf.RedirectURL, app.redirects[0]} {
			other.conf.RedirectURL = redirect
			_, err = other.conf.Exchange(other.ctx, l.code, oauth2.VerifierOption(l.verifier))
			expectRetrieveError(t, err, http.StatusBadRequest, "invalid_grant")
		}
		e.expectUserinfo(t, tok.AccessToken, idt.Subject)
		if _, err := rp.forceRefresh(tok.RefreshToken); err != nil {
			t.Errorf("refresh after another client presented the used code: %v", err)
		}
	})
}

// TestOIDCPairwiseSubjects checks that sub is stable for one person and one
// sector, across logins and a restart on the same data, and differs between
// sectors and between people.
func TestOIDCPairwiseSubjects(t *testing.T) {
	t.Parallel()
	shop := newOIDCClient("shop", "")
	blogA, blogB := newOIDCClient("blog-a", "blogs.example"), newOIDCClient("blog-b", "blogs.example")
	e := startOIDC(t, []oidcClient{shop, blogA, blogB})
	alice, bob := e.subject("alice"), e.subject("bob")

	type signedIn struct {
		sub, access string
	}
	signIn := func(t *testing.T, c oidcClient, subject string) signedIn {
		t.Helper()
		rp := newRelyingParty(t, e, c, oauth2.AuthStyleInHeader, oidc.ScopeOpenID)
		l := rp.login(t, e, subject)
		tok, err := rp.conf.Exchange(rp.ctx, l.code, oauth2.VerifierOption(l.verifier))
		if err != nil {
			t.Fatalf("Exchange at %s: %v", c.id, err)
		}
		idt, _ := rp.verifyIDToken(t, tok, l.nonce, l.scanned)
		for _, raw := range []string{tok.AccessToken, tok.Extra("id_token").(string)} {
			if strings.Contains(str(jwtPart(t, raw, 1)["sub"]), subject) {
				t.Errorf("a token reveals the raw palm subject")
			}
		}
		e.expectUserinfo(t, tok.AccessToken, idt.Subject)
		return signedIn{sub: idt.Subject, access: tok.AccessToken}
	}

	shop1, shop2 := signIn(t, shop, alice), signIn(t, shop, alice)
	if shop1.sub != shop2.sub {
		t.Errorf("alice at shop: sub %q then %q, want stable", shop1.sub, shop2.sub)
	}
	a, b := signIn(t, blogA, alice), signIn(t, blogB, alice)
	if a.sub != b.sub {
		t.Errorf("alice at blog-a %q and blog-b %q (same sector): want the same sub", a.sub, b.sub)
	}
	if a.sub == shop1.sub {
		t.Errorf("alice has sub %q at shop and at sector blogs.example: want different subs", a.sub)
	}
	bobShop := signIn(t, shop, bob)
	if bobShop.sub == shop1.sub {
		t.Errorf("alice and bob share sub %q at shop", bobShop.sub)
	}

	e.Restart(t)
	// Keys, grants and the pairwise secret live in the data directory.
	e.expectUserinfo(t, shop1.access, shop1.sub)
	if got := signIn(t, shop, alice).sub; got != shop1.sub {
		t.Errorf("alice at shop after a restart: sub %q, want %q", got, shop1.sub)
	}
	if got := signIn(t, blogB, alice).sub; got != a.sub {
		t.Errorf("alice at blog-b after a restart: sub %q, want %q", got, a.sub)
	}
	if got := signIn(t, shop, bob).sub; got != bobShop.sub {
		t.Errorf("bob at shop after a restart: sub %q, want %q", got, bobShop.sub)
	}
}

// TestOIDCIDTokenAlgorithms: a client's id_token_signed_response_alg picks the
// algorithm of its ID tokens, from the code and from a refresh; go-oidc verifies
// each with the JWKS, with the provider's advertised algorithms and pinned to the
// one picked (and a verifier pinned to another algorithm refuses it). Access tokens
// stay ES256.
func TestOIDCIDTokenAlgorithms(t *testing.T) {
	t.Parallel()
	var clients []oidcClient
	for _, alg := range []string{"", "RS256", "ES256", "EdDSA"} {
		c := newOIDCClient("app"+strings.ToLower(alg), "")
		c.idTokenAlg = alg
		clients = append(clients, c)
	}
	e := startOIDC(t, clients)
	for _, c := range clients {
		alg := cmp.Or(c.idTokenAlg, "RS256")
		t.Run(cmp.Or(c.idTokenAlg, "default"), func(t *testing.T) {
			t.Parallel()
			rp := newRelyingParty(t, e, c, oauth2.AuthStyleInParams, oidc.ScopeOpenID, oidc.ScopeOfflineAccess)
			l := rp.login(t, e, e.subject("alice"))
			tok, err := rp.conf.Exchange(rp.ctx, l.code, oauth2.VerifierOption(l.verifier))
			if err != nil {
				t.Fatalf("Exchange: %v", err)
			}
			idt, claims := rp.verifyIDToken(t, tok, l.nonce, l.scanned) // checks the header's alg
			raw, _ := tok.Extra("id_token").(string)
			pinned := rp.provider.Verifier(&oidc.Config{ClientID: c.id, SupportedSigningAlgs: []string{alg}})
			if _, err := pinned.Verify(rp.ctx, raw); err != nil {
				t.Errorf("go-oidc pinned to %s: %v", alg, err)
			}
			other := map[string]string{"RS256": "ES256", "ES256": "EdDSA", "EdDSA": "RS256"}[alg]
			if _, err := rp.provider.Verifier(&oidc.Config{ClientID: c.id, SupportedSigningAlgs: []string{other}}).Verify(rp.ctx, raw); err == nil {
				t.Errorf("go-oidc pinned to %s accepted a %s ID token", other, alg)
			}
			if h := jwtPart(t, tok.AccessToken, 0); h["alg"] != "ES256" {
				t.Errorf("access token alg %v, want ES256", h["alg"])
			}
			rp.expectAccessToken(t, e, tok.AccessToken, idt.Subject, claims.SID, "offline_access openid")
			next, err := rp.forceRefresh(tok.RefreshToken)
			if err != nil {
				t.Fatalf("refresh: %v", err)
			}
			if rid, _ := rp.verifyIDToken(t, next, "", time.Unix(claims.AuthTime, 0)); rid.Subject != idt.Subject {
				t.Errorf("refreshed ID token sub %q, want %q", rid.Subject, idt.Subject)
			}
		})
	}
}
