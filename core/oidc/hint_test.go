package oidc

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/core/keys"
)

// idTokenOf logs who in with a palm scan (in a browser without a session) and
// returns their ID token for client app and the SSO session the scan started.
func (h *harness) idTokenOf(t *testing.T, who string) (string, *Session) {
	t.Helper()
	l, sess := h.scanLogin(t, nil, who, "")
	resp, err := h.svc.ExchangeCode(context.Background(), "app", l.code, appRedirect, "")
	if err != nil {
		t.Fatalf("ExchangeCode: %v", err)
	}
	return resp.IDToken, sess
}

// TestAuthorizeIDTokenHint: within an SSO session, an id_token_hint naming the
// session's person is answered from the session (also once the ID token has
// expired); one naming another person is never signed in as the session's:
// prompt=none sends login_required back, with state and iss, and a plain request
// asks for a palm scan.
func TestAuthorizeIDTokenHint(t *testing.T) {
	h := newSSOHarness(t, ssoTTL)
	aliceHint, aliceSess := h.idTokenOf(t, "alice")
	bobHint, _ := h.idTokenOf(t, "bob")

	wantCode(t)(h.inSession(aliceSess.ID, testBrowser, "prompt", "none", IDTokenHintParam, aliceHint))
	wantCode(t)(h.inSession(aliceSess.ID, testBrowser, IDTokenHintParam, aliceHint))

	_, err := h.inSession(aliceSess.ID, testBrowser, "prompt", "none", IDTokenHintParam, bobHint)
	oe := wantError(t, err, ErrLoginRequired)
	if oe.RedirectURI != appRedirect || oe.State != "st-123" {
		t.Errorf("login_required goes back to %q with state %q, want %q and st-123", oe.RedirectURI, oe.State, appRedirect)
	}
	wantScan(t)(h.inSession(aliceSess.ID, testBrowser, IDTokenHintParam, bobHint))

	// The ID tokens have expired (they live access_token_ttl); the session has not.
	h.clock.Advance(accessTTL + time.Minute)
	wantCode(t)(h.inSession(aliceSess.ID, testBrowser, "prompt", "none", IDTokenHintParam, aliceHint))
	_, err = h.inSession(aliceSess.ID, testBrowser, "prompt", "none", IDTokenHintParam, bobHint)
	wantError(t, err, ErrLoginRequired)

	// Without a session the hint changes nothing: a scan (or login_required).
	wantScan(t)(h.inSession("", otherBrowser, IDTokenHintParam, aliceHint))
	_, err = h.inSession("", otherBrowser, "prompt", "none", IDTokenHintParam, aliceHint)
	wantError(t, err, ErrLoginRequired)
}

// TestAuthorizeIDTokenHintSector: the hint's pairwise sub is compared with the
// session person's sub at the requesting client's sector (client other's sector
// is not its client_id), not at its client_id.
func TestAuthorizeIDTokenHintSector(t *testing.T) {
	h := newSSOHarness(t, ssoTTL)
	other := []string{"client_id", "other", "redirect_uri", otherRedir}
	hintOf := func(who string) (string, *Session) {
		l, sess := h.scanLogin(t, other, who, "")
		resp, err := h.svc.ExchangeCode(context.Background(), "other", l.code, otherRedir, "")
		if err != nil {
			t.Fatal(err)
		}
		return resp.IDToken, sess
	}
	aliceHint, sess := hintOf("alice")
	bobHint, _ := hintOf("bob")
	wantCode(t)(h.inSession(sess.ID, testBrowser, append(other, "prompt", "none", IDTokenHintParam, aliceHint)...))
	_, err := h.inSession(sess.ID, testBrowser, append(other, "prompt", "none", IDTokenHintParam, bobHint)...)
	wantError(t, err, ErrLoginRequired)
}

// TestAuthorizeIDTokenHintRefused: a hint this issuer did not sign for the
// requesting client is invalid_request, sent back to the client with its state,
// with or without a session and whatever the prompt.
func TestAuthorizeIDTokenHintRefused(t *testing.T) {
	h := newSSOHarness(t, ssoTTL)
	aliceHint, sess := h.idTokenOf(t, "alice")
	var claims IDClaims
	h.parseToken(t, aliceHint, keys.RS256, &claims)

	forgeKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	forged := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	forged.Header["typ"], forged.Header["kid"] = TypeIDToken, "not-a-palmgate-key"
	forgedHint, _ := forged.SignedString(forgeKey)

	other := claims
	other.Issuer = "https://elsewhere.example.test/oauth2"
	otherIssHint, err := h.keys.Sign(keys.RS256, TypeIDToken, other)
	if err != nil {
		t.Fatal(err)
	}
	otherAud := claims
	otherAud.Audience = jwt.ClaimStrings{"other"}
	otherAudHint, err := h.keys.Sign(keys.RS256, TypeIDToken, otherAud)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := h.svc.ExchangeCode(context.Background(), "app", wantCode(t)(h.inSession(sess.ID, testBrowser)), appRedirect, "")
	if err != nil {
		t.Fatal(err)
	}
	for name, hint := range map[string]string{
		"not a JWT":             "not-a-token",
		"bad signature":         forgedHint,
		"another issuer":        otherIssHint,
		"another client as aud": otherAudHint,
		"an access token":       tok.AccessToken,
		"changed payload":       tamperAud(t, aliceHint),
	} {
		t.Run(name, func(t *testing.T) {
			for _, session := range []string{sess.ID, ""} {
				for _, prompt := range []string{"none", ""} {
					_, err := h.inSession(session, testBrowser, "prompt", prompt, IDTokenHintParam, hint)
					oe := wantError(t, err, ErrInvalidRequest)
					if oe.RedirectURI != appRedirect || oe.State != "st-123" {
						t.Errorf("invalid_request goes back to %q with state %q", oe.RedirectURI, oe.State)
					}
				}
			}
		})
	}
}
