package bearer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/core/keys"
)

// TestCacheEvictsNearestExpiry: a full cache makes room by dropping the expired
// entries, then those nearest their expiry; the tokens with the most life left
// (those just issued) stay.
func TestCacheEvictsNearestExpiry(t *testing.T) {
	now := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	claims := func(exp time.Duration) *Claims {
		return &Claims{RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(now.Add(exp))}}
	}
	c := newCache(100, 0)
	// 100 entries expiring in 1..100 minutes, put in an order unrelated to it.
	for i := range 100 {
		m := (i*37)%100 + 1
		c.put(fmt.Sprintf("token-%d", m), claims(time.Duration(m)*time.Minute), now)
	}
	c.put("fresh", claims(2*time.Hour), now)
	if _, ok := c.get("fresh", now); !ok {
		t.Fatal("the token just put was evicted")
	}
	for m := 1; m <= 100; m++ {
		_, ok := c.get(fmt.Sprintf("token-%d", m), now)
		if evicted := m <= 11; ok == evicted { // to 89, under nine tenths, then the new one
			t.Errorf("token expiring in %d min: kept %v, want the 11 nearest their expiry evicted and the rest kept", m, ok)
		}
	}

	// At the default size the tenth is estimated from a sample: of the 1,000
	// entries nearest their expiry, few survive (an arbitrary tenth would leave
	// about 900).
	c = newCache(DefaultCacheSize, 0)
	for i := range DefaultCacheSize {
		m := (i*7919)%DefaultCacheSize + 1
		c.put(fmt.Sprintf("token-%d", m), claims(time.Duration(m)*time.Second), now)
	}
	c.put("fresh", claims(time.Duration(2*DefaultCacheSize)*time.Second), now)
	survivors := 0
	for m := 1; m <= DefaultCacheSize/10; m++ {
		if _, ok := c.get(fmt.Sprintf("token-%d", m), now); ok {
			survivors++
		}
	}
	if _, ok := c.get("fresh", now); !ok || survivors > DefaultCacheSize/20 || len(c.entries) >= DefaultCacheSize {
		t.Errorf("after one eviction at the default size: fresh kept %v, %d of the 1,000 nearest their expiry kept, %d entries", ok, survivors, len(c.entries))
	}

	// Expired entries go first, and nothing else while that makes room.
	c = newCache(10, 0)
	for i := range 10 {
		exp := time.Hour
		if i%2 == 0 {
			exp = -time.Minute
		}
		c.put(fmt.Sprintf("t-%d", i), claims(exp), now)
	}
	c.put("fresh", claims(time.Hour), now)
	if n := len(c.entries); n != 6 {
		t.Errorf("%d entries after evicting 5 expired ones and putting one, want 6", n)
	}
}

// BenchmarkCachePutFull: the amortized cost of a put into a full cache of the
// default size, eviction included.
func BenchmarkCachePutFull(b *testing.B) {
	now := time.Now()
	c := newCache(DefaultCacheSize, 0)
	tokens := make([]string, 2*DefaultCacheSize)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("token-%d", i)
	}
	for i := range DefaultCacheSize {
		c.put(tokens[i], &Claims{RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(now.Add(time.Duration(i) * time.Second))}}, now)
	}
	b.ResetTimer()
	for i := range b.N {
		c.put(tokens[i%len(tokens)], &Claims{RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(now.Add(time.Duration(DefaultCacheSize+i) * time.Second))}}, now)
	}
}

// TestCacheAdmitsOnlyTheStringVerified: the cache's key is the hash of the
// signature segment alone, so a token cached, then sent again with another
// header or payload and the same signature, must be no hit: it is verified, and
// refused. The entry keeps its own copy of the header and payload, not a slice
// of the token, which would keep the signature in memory with it.
func TestCacheAdmitsOnlyTheStringVerified(t *testing.T) {
	ctx := context.Background()
	f := newTokenFixture(t, "https://id.example.test/oauth2")
	v := NewVerifier(Config{Issuer: f.issuer, Algorithm: keys.ES256, Keys: f.set, Now: f.clock.Now})
	token, other := f.token(t, "cached"), f.token(t, "other")
	if _, err := v.Verify(ctx, token); err != nil {
		t.Fatal(err)
	}
	dot, otherDot := strings.LastIndexByte(token, '.'), strings.LastIndexByte(other, '.')
	for name, forged := range map[string]string{
		"another token's header and payload": other[:otherDot] + token[dot:],
		"the payload cut short":              token[:dot-4] + token[dot:],
		"no header or payload":               token[dot:],
		"the signature segment alone":        token[dot+1:],
	} {
		if _, err := v.Verify(ctx, forged); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s with the cached token's signature: Verify err = %v, want ErrInvalidToken", name, err)
		}
	}
	if _, err := v.Verify(ctx, token); err != nil {
		t.Errorf("the cached token itself refused: %v", err)
	}
	_, key := splitToken(token)
	if e := v.cache.entries[key]; unsafe.StringData(e.signed) == unsafe.StringData(token) {
		t.Error("the cache entry's header and payload share the token's memory, signature included")
	}
}
