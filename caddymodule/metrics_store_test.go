package caddymodule

import (
	"context"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/palmgate/palmgate/core/agent"
)

// metricValue returns the value of the series name{labels...} in reg (a
// histogram's sample count), and whether reg has it.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels ...string) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue series
				}
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue(), true
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue(), true
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// generation is one config generation: its context (and metrics registry) and app.
type generation struct {
	reg *prometheus.Registry
	app *App
}

// provisionGeneration provisions, in a new caddy.Context, a dev app on the
// Badger directory dir (shared with the other generations on it, as on a reload).
func provisionGeneration(t *testing.T, dir string) generation {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	a := &App{Issuer: "http://localhost:9", Dev: true, Storage: &StorageConfig{Backend: "badger", Path: dir}, MaxPendingLogins: 7}
	if err := a.Provision(ctx); err != nil {
		t.Fatalf("Provision: %v", err)
	}
	t.Cleanup(func() { a.Cleanup() })
	return generation{reg: ctx.GetMetricsRegistry(), app: a}
}

// leaderboardMisses is the leaderboard cache's misses as reg reports them.
func leaderboardMisses(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	v, ok := metricValue(t, reg, "palmgate_cache_requests_total", "cache", agent.CacheLeaderboard, "result", "miss")
	if !ok {
		t.Fatal("no palmgate_cache_requests_total{cache=leaderboard,result=miss}")
	}
	return v
}

// TestStoreMetricsAcrossReloads: every config generation's registry (Caddy makes
// one per config) has the store, cache and pending series; the store's survive
// a reload; the cache and pending series are the current app's: the one started
// last and not stopped, which is the old one again when the new one stops
// (a reload that failed).
func TestStoreMetricsAcrossReloads(t *testing.T) {
	dir := t.TempDir()
	old := provisionGeneration(t, dir)
	if err := registerStoreMetrics(old.reg); err != nil {
		t.Fatalf("registering a second time on one registry: %v", err)
	}
	if _, ok := metricValue(t, old.reg, "palmgate_cache_requests_total"); ok {
		t.Error("cache series before any app started")
	}
	if err := old.app.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { old.app.Stop() })
	updates, ok := metricValue(t, old.reg, "palmgate_store_operation_duration_seconds", "backend", "badger", "op", "update")
	if !ok || updates == 0 {
		t.Errorf("badger update durations: %v, %v; want some (Provision writes the keys)", updates, ok)
	}
	if v, ok := metricValue(t, old.reg, "palmgate_pending_challenges_limit", "purpose", "login"); v != 7 || !ok {
		t.Errorf("login cap %v, %v; want 7", v, ok)
	}
	if v, ok := metricValue(t, old.reg, "palmgate_pending_challenges", "purpose", "login"); v != 0 || !ok {
		t.Errorf("pending logins %v, %v; want 0", v, ok)
	}
	if _, err := old.app.agents.Leaderboard(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	if got := leaderboardMisses(t, old.reg); got != 1 {
		t.Errorf("leaderboard misses %v, want 1", got)
	}

	// A reload: the new generation starts, then the old one stops.
	next := provisionGeneration(t, dir)
	if err := next.app.Start(); err != nil {
		t.Fatal(err)
	}
	if got := leaderboardMisses(t, next.reg); got != 0 {
		t.Errorf("the new generation's leaderboard misses %v, want 0 (its own app's)", got)
	}
	after, _ := metricValue(t, next.reg, "palmgate_store_operation_duration_seconds", "backend", "badger", "op", "update")
	if after < updates {
		t.Errorf("badger update durations %v on the new registry, fewer than the %v before the reload", after, updates)
	}
	// Say the reload fails after starting the new app: it is stopped, and the
	// old one, still running, is current again.
	if err := next.app.Stop(); err != nil {
		t.Fatal(err)
	}
	if got := leaderboardMisses(t, next.reg); got != 1 {
		t.Errorf("after the new app stopped, leaderboard misses %v, want the old app's 1", got)
	}
	if err := old.app.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, ok := metricValue(t, old.reg, "palmgate_cache_requests_total"); ok {
		t.Error("cache series with no app running")
	}
}
