package bearer

import (
	"crypto/sha256"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/palmgate/palmgate/core/cachestat"
)

// cache keeps verified claims by the token, until the token expires: by the
// SHA-256 of its signature segment, the header and payload compared in full on
// a hit (cacheEntry).
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
	entries map[[sha256.Size]byte]cacheEntry
	leeway  time.Duration     // the verifier's, on exp
	stats   cachestat.Counter // of get, when the cache is on
}

func newCache(max int, leeway time.Duration) *cache {
	if max < 0 {
		max = 0
	}
	return &cache{max: max, leeway: leeway, entries: make(map[[sha256.Size]byte]cacheEntry, min(max, 1024))}
}

// cacheEntry is one verified token's claims. Only the token's signature segment
// is hashed for its key: hashing all of a 630-byte token made a cached Verify
// take 449 ns, against 235 with the segment's hash and the comparison
// (BenchmarkVerifyCached). signed, the header and payload, is kept to be
// compared with a request's, so that only the very string verified is admitted.
// It is no secret: it is the claims the token carries, unsigned. The signature,
// which is, is kept only as its hash, so the cache's memory holds no usable
// token. signed doubles an entry's memory: 1,146 bytes with the claims and the
// map, against 543 before, 11 MB at DefaultCacheSize (630-byte tokens; the copy
// alone is 576 bytes, Go's size class for its 543). TestCacheEntryHoldsNoTokenMemory
// checks that no entry shares a token's memory.
type cacheEntry struct {
	signed string
	claims *Claims
}

func (c *cache) get(token string, now time.Time) (*Claims, bool) {
	if c.max == 0 {
		return nil, false
	}
	signed, key := splitToken(token)
	c.mu.RLock()
	e, ok := c.entries[key]
	c.mu.RUnlock()
	if !ok || e.signed != signed || !live(e.claims, now, c.leeway) {
		c.stats.Miss()
		return nil, false
	}
	c.stats.Hit()
	return e.claims, true
}

func (c *cache) put(token string, claims *Claims, now time.Time) {
	if c.max == 0 {
		return
	}
	signed, key := splitToken(token)
	// A copy: token[:i] would keep all of token, signature included, alive.
	e := cacheEntry{signed: strings.Clone(signed), claims: claims}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.max {
		c.evict(now)
	}
	c.entries[key] = e
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
	for k, e := range c.entries {
		if !live(e.claims, now, c.leeway) {
			delete(c.entries, k)
		}
	}
	keep := c.max - c.max/10
	if len(c.entries) < keep {
		return
	}
	sample := make([]time.Time, 0, evictSample)
	for _, e := range c.entries {
		if len(sample) == evictSample {
			break
		}
		sample = append(sample, e.claims.ExpiresAt.Time)
	}
	slices.SortFunc(sample, time.Time.Compare)
	cutoff := sample[(len(c.entries)-keep)*len(sample)/len(c.entries)]
	for k, e := range c.entries {
		if !e.claims.ExpiresAt.Time.After(cutoff) {
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

// splitToken splits token at its last '.' into the signed header and payload and
// the SHA-256 of the signature segment ("" and the whole token's for a string
// without one, which no parser accepts). The hash is taken in place:
// sha256.Sum256([]byte(sig)) would copy it to the heap, the one allocation of a
// cached Verify. Sum256 only reads its argument and keeps nothing of it.
func splitToken(token string) (signed string, sigHash [sha256.Size]byte) {
	i := strings.LastIndexByte(token, '.')
	sig := token[i+1:]
	if i >= 0 {
		signed = token[:i]
	}
	return signed, sha256.Sum256(unsafe.Slice(unsafe.StringData(sig), len(sig)))
}
