package oidc

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/core/keys"
)

const appLoggedOut = "https://app.example.test/logged-out"

// offlineLogin logs alice in to app with offline_access and returns the tokens.
func (h *harness) offlineLogin(t *testing.T) *TokenResponse {
	t.Helper()
	return h.exchange(t, h.login(t, params("scope", "openid offline_access"), "alice"), "")
}

func TestEndSessionRevokesTheLogin(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	tok := h.offlineLogin(t)
	other := h.offlineLogin(t) // another login of the same person: not ended
	out, err := h.svc.EndSession(ctx, url.Values{
		"id_token_hint": {tok.IDToken}, "post_logout_redirect_uri": {appLoggedOut}, "state": {"s-1"},
	})
	if err != nil {
		t.Fatalf("EndSession: %v", err)
	}
	if out.ClientID != "app" || out.GrantID == "" || out.URL() != appLoggedOut+"?state=s-1" {
		t.Fatalf("EndSession = %+v, URL %q", out, out.URL())
	}
	if _, err := h.svc.Refresh(ctx, "app", tok.RefreshToken, ""); err == nil {
		t.Error("the refresh token still works after logout")
	} else {
		wantError(t, err, ErrInvalidGrant)
	}
	if _, err := h.svc.VerifyAccessToken(ctx, tok.AccessToken); err == nil {
		t.Error("the access token still works after logout")
	}
	if _, err := h.svc.VerifyAccessToken(ctx, other.AccessToken); err != nil {
		t.Errorf("another login's access token was revoked: %v", err)
	}
	if _, err := h.svc.Refresh(ctx, "app", other.RefreshToken, ""); err != nil {
		t.Errorf("another login's refresh token was revoked: %v", err)
	}
}

func TestEndSessionAcceptsAnExpiredHint(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	tok := h.offlineLogin(t)
	h.clock.Advance(accessTTL + 24*time.Hour) // the ID token expired a day ago
	out, err := h.svc.EndSession(ctx, url.Values{"id_token_hint": {tok.IDToken}, "client_id": {"app"}})
	if err != nil || out.GrantID == "" || out.URL() != "" {
		t.Fatalf("EndSession with an expired hint = %+v, %v; want the grant revoked, no redirect", out, err)
	}
	if _, err := h.svc.Refresh(ctx, "app", tok.RefreshToken, ""); err == nil {
		t.Error("the refresh token still works after logout")
	}
}

func TestEndSessionWithoutHint(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	tok := h.offlineLogin(t)
	tests := []struct {
		name    string
		params  url.Values
		wantURL string
	}{
		{"nothing", url.Values{}, ""},
		{"client and redirect", url.Values{"client_id": {"app"}, "post_logout_redirect_uri": {appLoggedOut}, "state": {"x y"}}, appLoggedOut + "?state=x+y"},
		{"client only", url.Values{"client_id": {"app"}}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := h.svc.EndSession(ctx, tc.params)
			if err != nil || out.GrantID != "" || out.URL() != tc.wantURL {
				t.Fatalf("EndSession = %+v, %v; want no revocation, URL %q", out, err, tc.wantURL)
			}
		})
	}
	if _, err := h.svc.VerifyAccessToken(ctx, tok.AccessToken); err != nil {
		t.Errorf("a logout without hint revoked a login: %v", err)
	}
}

func TestEndSessionRefused(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	tok := h.offlineLogin(t)
	otherTok := h.exchange(t, h.login(t, params("client_id", "other", "redirect_uri", otherRedir, "scope", "openid offline_access"), "alice"), "")

	// A token of the same shape signed by a key this issuer does not have.
	forgeKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	var claims IDClaims
	h.parseToken(t, tok.IDToken, "RS256", &claims)
	forged := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	forged.Header["typ"], forged.Header["kid"] = TypeIDToken, "not-a-palmgate-key"
	forgedHint, _ := forged.SignedString(forgeKey)
	// A real signature of this issuer's key over another issuer's claims is not
	// available without the key, so the other issuer is a second service on
	// another base URL sharing nothing.
	foreign := newHarness(t)
	foreign.svc.issuer = "https://elsewhere.example.test/oauth2"
	foreignTok := foreign.offlineLogin(t)
	// This issuer's own key over claims naming another issuer: only the iss check
	// refuses it.
	claims.Issuer = "https://elsewhere.example.test/oauth2"
	otherIssHint, err := h.keys.Sign(keys.RS256, TypeIDToken, claims)
	if err != nil {
		t.Fatal(err)
	}
	// The access token is signed ES256 with typ at+jwt: never an ID token.
	tests := []struct {
		name   string
		params url.Values
	}{
		{"unregistered post_logout_redirect_uri", url.Values{"id_token_hint": {tok.IDToken}, "post_logout_redirect_uri": {"https://evil.example.test/"}}},
		{"redirect registered for another client", url.Values{"client_id": {"other"}, "post_logout_redirect_uri": {appLoggedOut}}},
		{"redirect_uri (not post-logout) of the client", url.Values{"client_id": {"app"}, "post_logout_redirect_uri": {appRedirect}}},
		{"redirect without client", url.Values{"post_logout_redirect_uri": {appLoggedOut}}},
		{"client_id is not the hint's aud", url.Values{"id_token_hint": {tok.IDToken}, "client_id": {"other"}}},
		{"hint of another client with this client's redirect", url.Values{"id_token_hint": {otherTok.IDToken}, "post_logout_redirect_uri": {appLoggedOut}}},
		{"unknown client", url.Values{"client_id": {"nobody"}}},
		{"forged hint", url.Values{"id_token_hint": {forgedHint}}},
		{"hint of another issuer", url.Values{"id_token_hint": {foreignTok.IDToken}}},
		{"hint naming another issuer", url.Values{"id_token_hint": {otherIssHint}}},
		{"hint with a changed payload", url.Values{"id_token_hint": {tamperAud(t, tok.IDToken)}}},
		{"access token as hint", url.Values{"id_token_hint": {tok.AccessToken}}},
		{"refresh token as hint", url.Values{"id_token_hint": {tok.RefreshToken}}},
		{"garbage hint", url.Values{"id_token_hint": {"not.a.jwt"}}},
		{"state too long", url.Values{"client_id": {"app"}, "post_logout_redirect_uri": {appLoggedOut}, "state": {strings.Repeat("s", MaxStateLen+1)}}},
		{"duplicate hint", url.Values{"id_token_hint": {tok.IDToken, otherTok.IDToken}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := h.svc.EndSession(ctx, tc.params)
			if out != nil {
				t.Errorf("EndSession returned %+v", out)
			}
			oe := wantError(t, err, ErrInvalidRequest)
			if oe.RedirectURI != "" || oe.Description == "" {
				t.Errorf("error %+v: want a description and no redirect", oe)
			}
		})
	}
	// Nothing was revoked by the refused requests.
	if _, err := h.svc.Refresh(ctx, "app", tok.RefreshToken, ""); err != nil {
		t.Errorf("a refused logout revoked app's login: %v", err)
	}
	if _, err := h.svc.Refresh(ctx, "other", otherTok.RefreshToken, ""); err != nil {
		t.Errorf("a refused logout revoked other's login: %v", err)
	}
}

// tamperAud changes the audience in an ID token's payload, keeping its signature.
func tamperAud(t *testing.T, token string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(payload), `"aud":["app"]`, `"aud":["other"]`, 1)
	if changed == string(payload) {
		t.Fatalf("payload %s has no aud to change", payload)
	}
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(changed))
	return strings.Join(parts, ".")
}

// TestAuthorizationResponsesCarryIss: RFC 9207, the code and the error redirects.
func TestAuthorizationResponsesCarryIss(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	ar := h.authorize(t, params())
	h.scan(t, ar, "alice")
	r, err := h.svc.Finish(ctx, ar.ID, testBinding)
	if err != nil || r == nil {
		t.Fatalf("Finish = %+v, %v", r, err)
	}
	u, _ := url.Parse(r.URL())
	if got := u.Query().Get("iss"); got != oauthIssuer || u.Query().Get("code") == "" {
		t.Errorf("code redirect %s: iss %q, want %q", r.URL(), got, oauthIssuer)
	}

	ar = h.authorize(t, params())
	h.clock.Advance(loginTTL + time.Minute) // the challenge expires: access_denied
	if r, err = h.svc.Finish(ctx, ar.ID, testBinding); err != nil || r == nil {
		t.Fatalf("Finish = %+v, %v", r, err)
	}
	u, _ = url.Parse(r.URL())
	if got := u.Query().Get("iss"); got != oauthIssuer || u.Query().Get("error") != ErrAccessDenied {
		t.Errorf("error redirect %s: iss %q, want %q", r.URL(), got, oauthIssuer)
	}
}

// TestRequestObjectRefused: a request parameter is refused even when empty.
func TestRequestObjectRefused(t *testing.T) {
	h := newHarness(t)
	for _, name := range []string{"request", "request_uri"} {
		p := params()
		p.Set(name, "")
		_, err := h.svc.Authorize(context.Background(), p, testBrowser)
		if err == nil {
			t.Errorf("%s= was accepted", name)
		}
	}
}
