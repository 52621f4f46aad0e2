// Package cachestat counts the hits and misses of palmgate's in-memory caches, for
// metrics: an atomic add per lookup, read at scrape time. It knows no metrics
// library.
package cachestat

import "sync/atomic"

// Counter counts the lookups of one cache. The zero value is ready to use, and a
// nil *Counter counts nothing.
type Counter struct {
	hits, misses atomic.Uint64
}

// Stats is what a Counter has counted.
type Stats struct {
	// Cache names the cache, a constant of the package that owns it (a metric
	// label value).
	Cache  string
	Hits   uint64
	Misses uint64
}

// Hit counts a lookup answered from the cache.
func (c *Counter) Hit() {
	if c != nil {
		c.hits.Add(1)
	}
}

// Miss counts a lookup the cache could not answer.
func (c *Counter) Miss() {
	if c != nil {
		c.misses.Add(1)
	}
}

// Record counts a hit when hit is true, else a miss.
func (c *Counter) Record(hit bool) {
	if hit {
		c.Hit()
	} else {
		c.Miss()
	}
}

// Stats returns the counts under the name cache.
func (c *Counter) Stats(cache string) Stats {
	if c == nil {
		return Stats{Cache: cache}
	}
	return Stats{Cache: cache, Hits: c.hits.Load(), Misses: c.misses.Load()}
}
