package bearer

import (
	"context"
	"testing"

	"github.com/palmgate/palmgate/core/cachestat"
	"github.com/palmgate/palmgate/core/keys"
)

// TestCacheStats: a token verified twice is a miss, then a hit; Remember counts
// nothing; a verifier without a cache counts nothing.
func TestCacheStats(t *testing.T) {
	ctx := context.Background()
	f := newTokenFixture(t, "https://id.example.test/oauth2")
	v := NewVerifier(Config{Issuer: f.issuer, Algorithm: keys.ES256, Keys: f.set, Now: f.clock.Now})
	none := NewVerifier(Config{Issuer: f.issuer, Algorithm: keys.ES256, Keys: f.set, Now: f.clock.Now, CacheSize: -1})
	token := f.token(t, "jti-counted")
	for _, verifier := range []*Verifier{v, none} {
		for range 2 {
			if _, err := verifier.Verify(ctx, token); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got, want := v.CacheStats(), (cachestat.Stats{Cache: CacheTokens, Hits: 1, Misses: 1}); got != want {
		t.Errorf("CacheStats after two Verify = %+v, want %+v", got, want)
	}
	if got, want := none.CacheStats(), (cachestat.Stats{Cache: CacheTokens}); got != want {
		t.Errorf("CacheStats without a cache = %+v, want %+v", got, want)
	}
	v.Remember(f.token(t, "jti-remembered"), &Claims{})
	if got := v.CacheStats(); got.Hits != 1 || got.Misses != 1 {
		t.Errorf("CacheStats after Remember = %+v, want unchanged", got)
	}
}
