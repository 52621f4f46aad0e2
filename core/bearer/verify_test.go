package bearer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/internal/clocktest"
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
		Revocations: revokedSet{"grant-revoked": true}, Now: f.clock.Now})
	sign := func(typ string, edit func(*Claims)) string {
		c := Claims{
			RegisteredClaims: jwt.RegisteredClaims{
				Issuer: f.issuer, Subject: "pairwise-sub", ID: "jti", Audience: jwt.ClaimStrings{"https://api.example.test"},
				IssuedAt: jwt.NewNumericDate(f.clock.Now()), ExpiresAt: jwt.NewNumericDate(f.clock.Now().Add(time.Hour)),
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
		{"expired", sign(TokenType, func(c *Claims) { c.ExpiresAt = jwt.NewNumericDate(f.clock.Now().Add(-time.Hour)) }), "", ErrInvalidToken},
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

// TestVerifyExpiry: without a leeway (the issuer's own tokens) a token is refused
// from the second its exp names, also when it was cached before; with one (a remote
// issuer) it is admitted until exp + leeway.
func TestVerifyExpiry(t *testing.T) {
	ctx := context.Background()
	f := newTokenFixture(t, "https://id.example.test/oauth2")
	f.clock.Set(f.clock.Now().Truncate(time.Second))
	start := f.clock.Now()
	exp := start.Add(2 * time.Second)
	token, err := f.set.Sign(keys.ES256, TokenType, Claims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: f.issuer, Subject: "sub", IssuedAt: jwt.NewNumericDate(start), ExpiresAt: jwt.NewNumericDate(exp)},
		GrantID:          "grant-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		leeway time.Duration
		at     time.Duration // after exp
		ok     bool
	}{
		{"own, a second before exp", 0, -time.Second, true},
		{"own, a millisecond before exp", 0, -time.Millisecond, true},
		{"own, at exp", 0, 0, false},
		{"own, a second past exp", 0, time.Second, false},
		{"remote, a second past exp", 30 * time.Second, time.Second, true},
		{"remote, just within the leeway", 30 * time.Second, 30*time.Second - time.Millisecond, true},
		{"remote, past the leeway", 30 * time.Second, 30 * time.Second, false},
	} {
		for _, cached := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, cached %v", tc.name, cached), func(t *testing.T) {
				clock := clocktest.New(start)
				size := -1
				if cached {
					size = 10
				}
				v := NewVerifier(Config{Issuer: f.issuer, Algorithm: keys.ES256, Keys: f.set, Leeway: tc.leeway, CacheSize: size, Now: clock.Now})
				if _, err := v.Verify(ctx, token); err != nil {
					t.Fatalf("fresh token refused: %v", err)
				}
				clock.Set(exp.Add(tc.at))
				_, err := v.Verify(ctx, token)
				if tc.ok && err != nil {
					t.Errorf("refused %v after exp: %v", tc.at, err)
				}
				if !tc.ok && !errors.Is(err, ErrInvalidToken) {
					t.Errorf("at %v after exp: %v, want ErrInvalidToken", tc.at, err)
				}
			})
		}
	}
}

// TestCachedVerifyAllocatesNothing: a reused token is answered from the cache
// without copying it to the heap (its signature's SHA-256 is taken in place), and the
// cache still tells a token from one differing in a byte.
func TestCachedVerifyAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	f := newTokenFixture(t, "https://id.example.test/oauth2")
	v := NewVerifier(Config{Issuer: f.issuer, Algorithm: keys.ES256, Keys: f.set, Now: f.clock.Now})
	token := f.token(t, "jti-cached")
	if _, err := v.Verify(ctx, token); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := v.Verify(ctx, token); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("a cached Verify allocates %.0f times, want 0", n)
	}
	tampered := []byte(token)
	tampered[len(tampered)/2] ^= 1
	if _, err := v.Verify(ctx, string(tampered)); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("a token differing in one byte from a cached one: %v, want ErrInvalidToken", err)
	}
}

// BenchmarkVerifyCached: a reused token as long as palmgate's own (a pairwise sub,
// an audience, uuids for jti and sid), answered from the cache; no revocations.
func BenchmarkVerifyCached(b *testing.B) {
	ctx := context.Background()
	f := newTokenFixture(b, "https://id.example.test/oauth2")
	v := NewVerifier(Config{Issuer: f.issuer, Algorithm: keys.ES256, Keys: f.set, Now: f.clock.Now})
	now := f.clock.Now()
	token, err := f.set.Sign(keys.ES256, TokenType, Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: f.issuer, Subject: strings.Repeat("s", 43), Audience: jwt.ClaimStrings{"https://api.example.test"},
			ID: uuid.NewString(), IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)),
		},
		ClientID: "app", Scope: "openid offline_access", AuthTime: now.Unix(), GrantID: uuid.NewString(),
	})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := v.Verify(ctx, token); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := v.Verify(ctx, token); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(token)), "token-bytes")
}
