package oidc

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/keys"
)

// forge signs claims with method and key under the given headers (nil removes one).
// An ES256 signature is put in its low-s form, as palmgate signs, so that a forged
// token is refused for the reason its case names.
func forge(t *testing.T, method jwt.SigningMethod, key any, headers map[string]any, claims jwt.Claims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	for name, v := range headers {
		if v == nil {
			delete(tok.Header, name)
		} else {
			tok.Header[name] = v
		}
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("signing forged token: %v", err)
	}
	if method == jwt.SigningMethodES256 {
		i := strings.LastIndexByte(s, '.')
		sig, err := base64.RawURLEncoding.DecodeString(s[i+1:])
		if err != nil {
			t.Fatal(err)
		}
		s = s[:i+1] + base64.RawURLEncoding.EncodeToString(keys.NormalizeS(sig))
	}
	return s
}

func TestVerifyAccessToken(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	l := h.login(t, params("scope", "openid offline_access"), "alice")
	resp := h.exchange(t, l, "")
	var real AccessClaims
	h.parseToken(t, resp.AccessToken, keys.ES256, &real)
	now := h.clock.Now()
	es, rs := h.keys.Active(keys.ES256), h.keys.Active(keys.RS256)
	atHeader := map[string]any{"typ": TypeAccessToken, "kid": es.ID}

	// claims returns the real token's claims changed by edit.
	claims := func(edit func(c *AccessClaims)) AccessClaims {
		c := real
		c.Audience = append(jwt.ClaimStrings(nil), real.Audience...)
		if edit != nil {
			edit(&c)
		}
		return c
	}
	strangerKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(es.Public())
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})

	tests := []struct {
		name  string
		token string
		ok    bool
	}{
		{"the access token", resp.AccessToken, true},
		{"typ application/at+jwt", forge(t, jwt.SigningMethodES256, es.Private, map[string]any{"typ": "application/at+jwt", "kid": es.ID}, claims(nil)), true},
		{"expired a second ago (no leeway on the issuer's own tokens)", forge(t, jwt.SigningMethodES256, es.Private, atHeader, claims(func(c *AccessClaims) {
			c.ExpiresAt = jwt.NewNumericDate(now.Add(-time.Second))
		})), false},
		{"empty", "", false},
		{"garbage", "a.b.c", false},
		{"ID token", resp.IDToken, false},
		{"refresh token", resp.RefreshToken, false},
		{"tampered payload", tamper(t, resp.AccessToken), false},
		{"unknown key", forge(t, jwt.SigningMethodES256, strangerKey, map[string]any{"typ": TypeAccessToken, "kid": "stranger"}, claims(nil)), false},
		{"unknown key under a known kid", forge(t, jwt.SigningMethodES256, strangerKey, atHeader, claims(nil)), false},
		{"no kid", forge(t, jwt.SigningMethodES256, es.Private, map[string]any{"typ": TypeAccessToken}, claims(nil)), false},
		{"kid of the RS256 key", forge(t, jwt.SigningMethodES256, es.Private, map[string]any{"typ": TypeAccessToken, "kid": rs.ID}, claims(nil)), false},
		{"alg none", forge(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, atHeader, claims(nil)), false},
		{"HS256 keyed with the public key DER", forge(t, jwt.SigningMethodHS256, pubDER, atHeader, claims(nil)), false},
		{"HS256 keyed with the public key PEM", forge(t, jwt.SigningMethodHS256, pubPEM, atHeader, claims(nil)), false},
		{"RS256 by the ID token key", forge(t, jwt.SigningMethodRS256, rs.Private, map[string]any{"typ": TypeAccessToken, "kid": rs.ID}, claims(nil)), false},
		{"no typ", forge(t, jwt.SigningMethodES256, es.Private, map[string]any{"typ": nil, "kid": es.ID}, claims(nil)), false},
		{"typ JWT", forge(t, jwt.SigningMethodES256, es.Private, map[string]any{"typ": "JWT", "kid": es.ID}, claims(nil)), false},
		{"typ rt+jwt", forge(t, jwt.SigningMethodES256, es.Private, map[string]any{"typ": TypeRefreshToken, "kid": es.ID}, claims(nil)), false},
		{"expired", forge(t, jwt.SigningMethodES256, es.Private, atHeader, claims(func(c *AccessClaims) {
			c.ExpiresAt = jwt.NewNumericDate(now.Add(-bearer.Leeway - time.Second))
		})), false},
		{"no exp", forge(t, jwt.SigningMethodES256, es.Private, atHeader, claims(func(c *AccessClaims) { c.ExpiresAt = nil })), false},
		{"issued in the future", forge(t, jwt.SigningMethodES256, es.Private, atHeader, claims(func(c *AccessClaims) {
			c.IssuedAt = jwt.NewNumericDate(now.Add(time.Hour))
		})), false},
		{"not valid yet", forge(t, jwt.SigningMethodES256, es.Private, atHeader, claims(func(c *AccessClaims) {
			c.NotBefore = jwt.NewNumericDate(now.Add(time.Hour))
		})), false},
		{"issuer without /oauth2", forge(t, jwt.SigningMethodES256, es.Private, atHeader, claims(func(c *AccessClaims) { c.Issuer = testIssuer })), false},
		{"other issuer", forge(t, jwt.SigningMethodES256, es.Private, atHeader, claims(func(c *AccessClaims) { c.Issuer = "https://evil.example.test/oauth2" })), false},
		{"no issuer", forge(t, jwt.SigningMethodES256, es.Private, atHeader, claims(func(c *AccessClaims) { c.Issuer = "" })), false},
		{"no sub", forge(t, jwt.SigningMethodES256, es.Private, atHeader, claims(func(c *AccessClaims) { c.Subject = "" })), false},
		{"no sid", forge(t, jwt.SigningMethodES256, es.Private, atHeader, claims(func(c *AccessClaims) { c.GrantID = "" })), false},
		// A validly signed token whose grant is unknown (expired from the store) is accepted: only revocations refuse a signed token.
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := h.svc.VerifyAccessToken(ctx, tc.token)
			if tc.ok {
				if err != nil {
					t.Fatalf("VerifyAccessToken: %v", err)
				}
				if got.Subject != real.Subject || got.GrantID != real.GrantID || got.ClientID != "app" || got.Scope != real.Scope {
					t.Errorf("claims = %+v, want %+v", got, real)
				}
				return
			}
			if got != nil {
				t.Errorf("claims returned for a refused token: %+v", got)
			}
			wantError(t, err, ErrInvalidToken)
		})
	}
}

// tamper changes the subject in the token's payload, keeping its signature.
func tamper(t *testing.T, token string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(payload), `"client_id":"app"`, `"client_id":"apq"`, 1)
	if changed == string(payload) {
		t.Fatalf("payload %s has no client_id to change", payload)
	}
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(changed))
	return strings.Join(parts, ".")
}

func TestVerifyAccessTokenLifetime(t *testing.T) {
	tests := []struct {
		name    string
		advance time.Duration
		ok      bool
	}{
		{"fresh", 0, true},
		{"just before expiry", accessTTL - time.Second, true},
		{"at expiry (no leeway)", accessTTL, false},
		{"a second past expiry", accessTTL + time.Second, false},
		{"long expired", 24 * time.Hour, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			resp := h.exchange(t, h.login(t, params(), "alice"), "")
			h.clock.Advance(tc.advance)
			_, err := h.svc.VerifyAccessToken(context.Background(), resp.AccessToken)
			if tc.ok && err != nil {
				t.Errorf("VerifyAccessToken: %v", err)
			}
			if !tc.ok {
				wantError(t, err, ErrInvalidToken)
			}
		})
	}
}

// TestVerifyAfterRotation checks that access tokens signed before a key rotation
// keep verifying and new ones carry the new key.
func TestVerifyAfterRotation(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	before := h.exchange(t, h.login(t, params(), "alice"), "")
	old := h.keys.Active(keys.ES256).ID
	if _, err := h.keys.Rotate(ctx, keys.ES256); err != nil {
		t.Fatalf("Rotate: %v", err)
	}
	after := h.exchange(t, h.login(t, params(), "alice"), "")
	for name, tok := range map[string]string{"before": before.AccessToken, "after": after.AccessToken} {
		if _, err := h.svc.VerifyAccessToken(ctx, tok); err != nil {
			t.Errorf("token signed %s the rotation: %v", name, err)
		}
	}
	var c AccessClaims
	if header := h.parseToken(t, after.AccessToken, keys.ES256, &c); header["kid"] == old {
		t.Errorf("new access token still signed by the old key %s", old)
	}
}
