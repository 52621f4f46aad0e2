package bearer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/internal/clocktest"
	"github.com/palmgate/palmgate/internal/jwttest"
	"github.com/palmgate/palmgate/internal/keystest"
	"github.com/palmgate/palmgate/storage/memstore"
)

type tokenFixture struct {
	set    *keys.Set
	clock  *clocktest.Clock
	issuer string
}

func newTokenFixture(t testing.TB, issuer string) *tokenFixture {
	t.Helper()
	store := memstore.New() // core's rules, not Badger's, are under test
	clock := clocktest.New(time.Now())
	set, err := keys.Open(context.Background(), store, clock.Now, keys.WithGenerator(keystest.Generator))
	if err != nil {
		t.Fatal(err)
	}
	return &tokenFixture{set: set, clock: clock, issuer: issuer}
}

func (f *tokenFixture) token(t *testing.T, jti string) string {
	t.Helper()
	token, err := f.set.Sign(keys.ES256, TokenType, Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: f.issuer, Subject: "pairwise-sub", ID: jti,
			IssuedAt: jwt.NewNumericDate(f.clock.Now()), ExpiresAt: jwt.NewNumericDate(f.clock.Now().Add(time.Hour)),
		},
		ClientID: "app", Scope: "openid", GrantID: "grant-" + jti,
	})
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// TestVerifyRefusesMalleatedTokens: a verifier of palmgate's own tokens accepts a
// token as issued and refuses its high-s twin and a copy with stray base64 bits,
// whether or not the token is cached.
func TestVerifyRefusesMalleatedTokens(t *testing.T) {
	ctx := context.Background()
	f := newTokenFixture(t, "https://id.example.test/oauth2")
	v := NewVerifier(Config{Issuer: f.issuer, Algorithm: keys.ES256, Keys: f.set, Now: f.clock.Now})
	for i := range 8 { // the signer's s is random: several tokens
		token := f.token(t, "jti-"+string(rune('a'+i)))
		for _, tc := range []struct {
			name  string
			token string
		}{
			{"high s, before the token is cached", jwttest.Malleate(t, token)},
			{"stray bits, before the token is cached", jwttest.StrayBits(token)},
		} {
			if _, err := v.Verify(ctx, tc.token); !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("token %d, %s: Verify err = %v, want ErrInvalidToken", i, tc.name, err)
			}
		}
		if _, err := v.Verify(ctx, token); err != nil {
			t.Fatalf("token %d as issued refused: %v", i, err)
		}
		for _, tc := range []struct {
			name  string
			token string
		}{
			{"high s, the token cached", jwttest.Malleate(t, token)},
			{"stray bits, the token cached", jwttest.StrayBits(token)},
		} {
			if _, err := v.Verify(ctx, tc.token); !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("token %d, %s: Verify err = %v, want ErrInvalidToken", i, tc.name, err)
			}
		}
	}
}

// TestRemoteVerifierHighS: a verifier of a remote issuer, which may not normalise
// s, accepts both forms of a token and keeps them as one cache entry; it still
// refuses stray bits.
func TestRemoteVerifierHighS(t *testing.T) {
	ctx := context.Background()
	f, v := confusionVerifier(t, true)
	token := f.token(t, "remote")
	twin := jwttest.Malleate(t, token)
	for _, tok := range []string{twin, token, twin} {
		if _, err := v.Verify(ctx, tok); err != nil {
			t.Fatalf("remote verifier refused a validly signed token: %v", err)
		}
	}
	if n := len(v.cache.entries); n != 1 {
		t.Errorf("a token and its high-s twin fill %d cache entries, want 1", n)
	}
	if _, err := v.Verify(ctx, jwttest.StrayBits(token)); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("stray bits: Verify err = %v, want ErrInvalidToken", err)
	}
}
