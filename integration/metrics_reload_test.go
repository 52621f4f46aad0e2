package integration

import (
	"testing"

	"github.com/palmgate/palmgate/internal/testserver"
)

// TestMetricsAfterRefusedReload: a `caddy reload` that palmgate refuses (a bad
// value of one of its options) leaves the running config serving, and its
// series on the admin /metrics with it. Caddy swaps the admin endpoint, with the
// new config's metrics registry, before it provisions the apps, so a palmgate
// that registered its series only after checking its options left /metrics
// without a single palmgate_ series until the next good reload: the dashboards
// went blank and absent() alerts fired for an instance that served (fourth
// review).
func TestMetricsAfterRefusedReload(t *testing.T) {
	t.Parallel()
	e := start(t, testserver.Options{})
	scrapeMetrics(t, e).must(t, "palmgate_logins_total", "outcome", "started")
	if out, err := e.TryReload(t, "access_token_ttl -5m"); err == nil {
		t.Fatalf("reload with access_token_ttl -5m succeeded:\n%s", out)
	}
	after := scrapeMetrics(t, e)
	for _, s := range []struct{ name, label, value string }{
		{"palmgate_logins_total", "outcome", "started"},
		{"palmgate_tokens_issued_total", "grant_type", "authorization_code"},
		{"palmgate_store_operation_duration_seconds_count", "op", "update"},
	} {
		if _, ok := after.value(s.name, s.label, s.value); !ok {
			t.Errorf("after a refused reload, no series %s{%s=%q} on the admin /metrics", s.name, s.label, s.value)
		}
	}
}
