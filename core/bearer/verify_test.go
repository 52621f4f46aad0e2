package bearer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/core/keys"
)

// revokedSet revokes the grants it holds.
type revokedSet map[string]bool

func (r revokedSet) Revoked(_ context.Context, grantID string) (bool, error) { return r[grantID], nil }

// TestVerifyEveryCheck: the one access-token verifier refuses a token without sub,
// without sid (which could not be revoked), of a revoked grant, of another issuer
// or another typ, and, asked for an audience, one issued for another.
func TestVerifyEveryCheck(t *testing.T) {
	ctx := context.Background()
	f := newTokenFixture(t, "https://id.example.test/oauth2")
	v := NewVerifier(Config{Issuer: f.issuer, Algorithm: keys.ES256, Keys: f.set,
		Revocations: revokedSet{"grant-revoked": true}, Now: func() time.Time { return f.now }})
	sign := func(typ string, edit func(*Claims)) string {
		c := Claims{
			RegisteredClaims: jwt.RegisteredClaims{
				Issuer: f.issuer, Subject: "pairwise-sub", ID: "jti", Audience: jwt.ClaimStrings{"https://api.example.test"},
				IssuedAt: jwt.NewNumericDate(f.now), ExpiresAt: jwt.NewNumericDate(f.now.Add(time.Hour)),
			},
			ClientID: "app", Scope: "openid", GrantID: "grant-1",
		}
		edit(&c)
		token, err := f.set.Sign(keys.ES256, typ, c)
		if err != nil {
			t.Fatal(err)
		}
		return token
	}
	valid := sign(TokenType, func(*Claims) {})
	if _, err := v.VerifyFor(ctx, valid, "https://api.example.test"); err != nil {
		t.Fatalf("valid token refused: %v", err)
	}
	for _, tc := range []struct {
		name     string
		token    string
		audience string
		want     error
	}{
		{"no sid", sign(TokenType, func(c *Claims) { c.GrantID = "" }), "", ErrInvalidToken},
		{"no sub", sign(TokenType, func(c *Claims) { c.Subject = "" }), "", ErrInvalidToken},
		{"no exp", sign(TokenType, func(c *Claims) { c.ExpiresAt = nil }), "", ErrInvalidToken},
		{"expired", sign(TokenType, func(c *Claims) { c.ExpiresAt = jwt.NewNumericDate(f.now.Add(-time.Hour)) }), "", ErrInvalidToken},
		{"other issuer", sign(TokenType, func(c *Claims) { c.Issuer = "https://evil.example.test/oauth2" }), "", ErrInvalidToken},
		{"typ JWT", sign("JWT", func(*Claims) {}), "", ErrInvalidToken},
		{"revoked grant", sign(TokenType, func(c *Claims) { c.GrantID = "grant-revoked" }), "", ErrInvalidToken},
		{"other audience", valid, "https://other.example.test", ErrWrongAudience},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := v.VerifyFor(ctx, tc.token, tc.audience); !errors.Is(err, tc.want) {
				t.Errorf("VerifyFor = %v, want %v", err, tc.want)
			}
		})
	}
}
