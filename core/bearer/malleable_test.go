package bearer

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/storage/memstore"
)

// orderP256 is n, the order of P-256 (SEC 2, section 2.4.2).
var orderP256, _ = new(big.Int).SetString("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551", 16)

// malleate returns token with its ES256 signature (r, s) replaced by (r, n-s),
// which verifies just as well: the malleated twin of a token.
func malleate(t *testing.T, token string) string {
	t.Helper()
	i := strings.LastIndexByte(token, '.')
	sig, err := base64.RawURLEncoding.DecodeString(token[i+1:])
	if err != nil || len(sig) != 64 {
		t.Fatalf("not an ES256 signature: %v", err)
	}
	s := new(big.Int).SetBytes(sig[32:])
	new(big.Int).Sub(orderP256, s).FillBytes(sig[32:])
	return token[:i+1] + base64.RawURLEncoding.EncodeToString(sig)
}

// strayBits returns token with the unused low bits of its signature segment's last
// character set: the same bytes to a lenient base64 decoder, another string.
func strayBits(t *testing.T, token string) string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, token[len(token)-1])
	// 64 bytes are 86 characters: the last one carries 2 bits and 4 unused ones.
	return token[:len(token)-1] + string(alphabet[last|0x0f])
}

type tokenFixture struct {
	set    *keys.Set
	now    time.Time
	issuer string
}

func newTokenFixture(t *testing.T, issuer string) *tokenFixture {
	t.Helper()
	store := memstore.New() // core's rules, not Badger's, are under test
	now := time.Now()
	set, err := keys.Open(context.Background(), store, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	return &tokenFixture{set: set, now: now, issuer: issuer}
}

func (f *tokenFixture) token(t *testing.T, jti string) string {
	t.Helper()
	token, err := f.set.Sign(keys.ES256, TokenType, Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: f.issuer, Subject: "pairwise-sub", ID: jti,
			IssuedAt: jwt.NewNumericDate(f.now), ExpiresAt: jwt.NewNumericDate(f.now.Add(time.Hour)),
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
	v := NewVerifier(Config{Issuer: f.issuer, Algorithm: keys.ES256, Keys: f.set, Now: func() time.Time { return f.now }})
	for i := range 8 { // the signer's s is random: several tokens
		token := f.token(t, "jti-"+string(rune('a'+i)))
		for _, tc := range []struct {
			name  string
			token string
		}{
			{"high s, before the token is cached", malleate(t, token)},
			{"stray bits, before the token is cached", strayBits(t, token)},
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
			{"high s, the token cached", malleate(t, token)},
			{"stray bits, the token cached", strayBits(t, token)},
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
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f := newTokenFixture(t, srv.URL+"/oauth2")
	mux.HandleFunc("/oauth2/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": f.issuer, "jwks_uri": srv.URL + "/oauth2/jwks"})
	})
	mux.HandleFunc("/oauth2/jwks", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": f.set.JWKS()})
	})
	remote := NewRemoteKeys(f.issuer, srv.Client(), time.Second, nil)
	v := NewVerifier(Config{Issuer: f.issuer, Algorithm: keys.ES256, Keys: remote, Now: func() time.Time { return f.now }})
	token := f.token(t, "remote")
	twin := malleate(t, token)
	for _, tok := range []string{twin, token, twin} {
		if _, err := v.Verify(ctx, tok); err != nil {
			t.Fatalf("remote verifier refused a validly signed token: %v", err)
		}
	}
	if n := len(v.cache.entries); n != 1 {
		t.Errorf("a token and its high-s twin fill %d cache entries, want 1", n)
	}
	if _, err := v.Verify(ctx, strayBits(t, token)); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("stray bits: Verify err = %v, want ErrInvalidToken", err)
	}
}
