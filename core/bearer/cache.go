package bearer

import (
	"crypto/sha256"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/palmgate/palmgate/core/cachestat"
)

// cache keeps verified claims by the SHA-256 of the token, until the token expires.
// It is bounded: when full, the entries nearest their expiry give way (expired
// ones first), so that the tokens this instance has just issued (Remember) stay.
//
// Staleness across instances: none that matters. It remembers only that a string
// was validly signed by one of the issuer's keys, which cannot change (keys are never
// withdrawn before the tokens they signed expire); Verify checks the revocation set
// on every use, cached or not, so a grant revoked on any instance refuses its cached
// tokens within that set's bound.
type cache struct {
	mu      sync.RWMutex
	max     int
	entries map[[sha256.Size]byte]*Claims
	leeway  time.Duration     // the verifier's, on exp
	stats   cachestat.Counter // of get, when the cache is on
}

func newCache(max int, leeway time.Duration) *cache {
	if max < 0 {
		max = 0
	}
	return &cache{max: max, leeway: leeway, entries: make(map[[sha256.Size]byte]*Claims, min(max, 1024))}
}

func (c *cache) get(token string, now time.Time) (*Claims, bool) {
	if c.max == 0 {
		return nil, false
	}
	key := tokenHash(token)
	c.mu.RLock()
	claims, ok := c.entries[key]
	c.mu.RUnlock()
	if !ok || !live(claims, now, c.leeway) {
		c.stats.Miss()
		return nil, false
	}
	c.stats.Hit()
	return claims, true
}

func (c *cache) put(token string, claims *Claims, now time.Time) {
	if c.max == 0 {
		return
	}
	key := tokenHash(token)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.max {
		c.evict(now)
	}
	c.entries[key] = claims
}

// evictSample is how many expiries evict reads to estimate which tenth of the
// entries is nearest its expiry.
const evictSample = 1024

// evict drops expired entries, then, until the cache is under nine tenths full,
// those nearest their expiry (the tokens with the least use left), found by the
// expiry below which a sample of the entries (map order is random) has its share
// to drop; an arbitrary entry gives way when that fell short. An arbitrary tenth
// alone could drop the tokens just issued, whose first use would then pay the
// signature check Remember saved. Two passes over the entries and a sort of the
// sample, once for each tenth of the cache put: BenchmarkCachePutFull 1.6 µs a
// put before, 2.0 µs with it. Called with the lock held.
func (c *cache) evict(now time.Time) {
	for k, v := range c.entries {
		if !live(v, now, c.leeway) {
			delete(c.entries, k)
		}
	}
	keep := c.max - c.max/10
	if len(c.entries) < keep {
		return
	}
	sample := make([]time.Time, 0, evictSample)
	for _, v := range c.entries {
		if len(sample) == evictSample {
			break
		}
		sample = append(sample, v.ExpiresAt.Time)
	}
	slices.SortFunc(sample, time.Time.Compare)
	cutoff := sample[(len(c.entries)-keep)*len(sample)/len(c.entries)]
	for k, v := range c.entries {
		if !v.ExpiresAt.Time.After(cutoff) {
			delete(c.entries, k)
		}
	}
	for k := range c.entries {
		if len(c.entries) < keep {
			break
		}
		delete(c.entries, k)
	}
}

// tokenHash is the SHA-256 of token, hashed in place: sha256.Sum256([]byte(token))
// copied every token (about 600 bytes) to the heap, the one allocation of a
// cached Verify. Sum256 only reads its argument and keeps nothing of it.
func tokenHash(token string) [sha256.Size]byte {
	return sha256.Sum256(unsafe.Slice(unsafe.StringData(token), len(token)))
}
