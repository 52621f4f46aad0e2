package caddymodule

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/palmgate/palmgate/core/cachestat"
	"github.com/palmgate/palmgate/storage"
)

// Store, cache and pending metrics, on Caddy's metrics registry (the admin
// endpoint's /metrics, beside caddy_http_*).
//
// The collectors are made once per process: the store outlives config
// generations (it is shared through a caddy.UsagePool), and so do its
// histograms and counters. Caddy makes a new registry for each config it loads,
// so each generation's app registers them on its own registry (Provision);
// registering one twice on a registry is not an error. The cache and pending
// series are read at scrape time from the current app: the one started last and
// not stopped (a reload starts the new app before it stops the old one; a reload
// that fails stops the new one and the old one is current again).

// storeOpBuckets spans a point read on a local Badger (tens of µs) to a
// statement that runs into PostgreSQL's default statement_timeout (5s).
var storeOpBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// groupSizeBuckets spans a lone Update to the largest groups (pgstore 32,
// badgerstore 128).
var groupSizeBuckets = prometheus.ExponentialBuckets(1, 2, 8)

// storeMetricSet is the process's store, cache and pending collectors.
type storeMetricSet struct {
	opDuration      *prometheus.HistogramVec // backend, op
	conflictRetries *prometheus.CounterVec   // backend
	groupSize       *prometheus.HistogramVec // backend
	groupFallbacks  *prometheus.CounterVec   // backend, reason
	apps            *appCollector
}

// storeMetrics returns the process's collectors, made on first use.
var storeMetrics = sync.OnceValue(func() *storeMetricSet {
	const ns, sub = "palmgate", "store"
	return &storeMetricSet{
		opDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "operation_duration_seconds",
			Help:    "Duration of store operations (op: view, update, read_key), an update's conflict retries and its wait for a group commit included.",
			Buckets: storeOpBuckets,
		}, []string{"backend", "op"}),
		conflictRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "conflict_retries_total",
			Help: "Update transactions run again because they conflicted with a concurrent transaction (a serialization failure, a deadlock or a conflicting commit).",
		}, []string{"backend"}),
		groupSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "group_commit_size",
			Help:    "Updates that one grouped commit took together (1: an update that found none to share its transaction with).",
			Buckets: groupSizeBuckets,
		}, []string{"backend"}),
		groupFallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "group_commit_fallbacks_total",
			Help: "Updates that left a grouped commit to run in a transaction of their own, by reason (conflict, iterate, failed_group, fn_error, panic).",
		}, []string{"backend", "reason"}),
		apps: newAppCollector(),
	}
})

// registerStoreMetrics registers the store, cache and pending collectors on reg
// (a config generation's registry; nil registers nothing).
func registerStoreMetrics(reg *prometheus.Registry) error {
	if reg == nil {
		return nil
	}
	m := storeMetrics()
	for _, c := range []prometheus.Collector{m.opDuration, m.conflictRetries, m.groupSize, m.groupFallbacks, m.apps} {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if errors.As(err, &already) && already.ExistingCollector == c {
				continue
			}
			return fmt.Errorf("registering palmgate's store metrics: %w", err)
		}
	}
	return nil
}

// storeObserver is a storage.Observer feeding the process's store metrics for
// one backend. Its series are resolved once, so an observation is a lookup-free
// Observe or Inc.
type storeObserver struct {
	ops       map[storage.Op]prometheus.Observer
	retries   prometheus.Counter
	groups    prometheus.Observer
	fallbacks *prometheus.CounterVec // curried with the backend
}

var _ storage.Observer = (*storeObserver)(nil)

// newStoreObserver returns the observer of a store of backend ("badger",
// "postgres"), whose operations are ops.
func newStoreObserver(backend string, ops ...storage.Op) *storeObserver {
	m := storeMetrics()
	o := &storeObserver{
		ops:       map[storage.Op]prometheus.Observer{},
		retries:   m.conflictRetries.WithLabelValues(backend),
		groups:    m.groupSize.WithLabelValues(backend),
		fallbacks: m.groupFallbacks.MustCurryWith(prometheus.Labels{"backend": backend}),
	}
	for _, op := range ops {
		o.ops[op] = m.opDuration.WithLabelValues(backend, string(op))
	}
	return o
}

// Operation observes op's duration; an op the backend was not made with is dropped.
func (o *storeObserver) Operation(op storage.Op, d time.Duration) {
	if h := o.ops[op]; h != nil {
		h.Observe(d.Seconds())
	}
}

// ConflictRetry counts a retry.
func (o *storeObserver) ConflictRetry() { o.retries.Inc() }

// Group observes a group commit's size.
func (o *storeObserver) Group(size int) { o.groups.Observe(float64(size)) }

// GroupFallback counts a member that left its group; reason is one of storage's
// constants, a bounded label value.
func (o *storeObserver) GroupFallback(reason storage.Fallback) {
	o.fallbacks.WithLabelValues(string(reason)).Inc()
}

// appCollector reports the caches' hits and misses and the pending counts of the
// current app at scrape time.
type appCollector struct {
	mu   sync.Mutex
	live []*App // started and not stopped, oldest first

	cacheRequests, pending, pendingLimit *prometheus.Desc
}

func newAppCollector() *appCollector {
	return &appCollector{
		cacheRequests: prometheus.NewDesc("palmgate_cache_requests_total",
			"Lookups of palmgate's in-memory caches by result (hit, miss), since the running config was loaded.",
			[]string{"cache", "result"}, nil),
		pending: prometheus.NewDesc("palmgate_pending_challenges",
			"Palm challenges (purpose: login, agent_registration) this instance started that still count against its cap: those started within their lifetime plus 10 minutes, finished or not. Per instance: with several, the bound is the sum of their caps.",
			[]string{"purpose"}, nil),
		pendingLimit: prometheus.NewDesc("palmgate_pending_challenges_limit",
			"The cap on palmgate_pending_challenges (max_pending_logins, max_pending_registrations); absent when the cap is off.",
			[]string{"purpose"}, nil),
	}
}

// started makes a the current app.
func (c *appCollector) started(a *App) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live = append(c.live, a)
}

// stopped forgets a; the app started before it, if still running, is current again.
func (c *appCollector) stopped(a *App) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live = slices.DeleteFunc(c.live, func(x *App) bool { return x == a })
}

// current is the app started last and not stopped, or nil.
func (c *appCollector) current() *App {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.live) == 0 {
		return nil
	}
	return c.live[len(c.live)-1]
}

// Describe sends the descriptions of every series Collect sends.
func (c *appCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.cacheRequests
	ch <- c.pending
	ch <- c.pendingLimit
}

// Collect sends the current app's cache counts and pending counts.
func (c *appCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.current()
	if a == nil {
		return
	}
	for _, s := range a.cacheStats() {
		ch <- prometheus.MustNewConstMetric(c.cacheRequests, prometheus.CounterValue, float64(s.Hits), s.Cache, "hit")
		ch <- prometheus.MustNewConstMetric(c.cacheRequests, prometheus.CounterValue, float64(s.Misses), s.Cache, "miss")
	}
	for _, p := range a.palm.PendingStats() {
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(p.Count), string(p.Purpose))
		ch <- prometheus.MustNewConstMetric(c.pendingLimit, prometheus.GaugeValue, float64(p.Limit), string(p.Purpose))
	}
}

// cacheStats are the counts of the app's caches: the agent registry's and the
// verified-token cache shared by userinfo, /oauth2/check and palmgate_bearer
// (those with their own cache_size or a remote issuer have caches of their own,
// not counted here).
func (a *App) cacheStats() []cachestat.Stats {
	return append(a.agents.CacheStats(), a.oidc.AccessVerifier().CacheStats())
}
