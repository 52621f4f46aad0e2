package integration

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/pgtest"
	"github.com/palmgate/palmgate/internal/testserver"
)

// probe is one answer of a health probe.
type probe struct {
	status int
	body   map[string]any
	raw    string
}

// healthProbe GETs a probe (a path of the site, or a full URL on the admin API)
// and checks what every answer of one has: JSON, no-store, and Retry-After when
// it is 503.
func (e *env) healthProbe(t *testing.T, target string) probe {
	t.Helper()
	resp := e.do(t, "GET", target, nil)
	p := probe{status: resp.Status, raw: string(resp.Body)}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("%s: Cache-Control %q, want no-store", resp.Request, cc)
	}
	if resp.Status == http.StatusServiceUnavailable {
		if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 {
			t.Errorf("%s: 503 with Retry-After %q", resp.Request, resp.Header.Get("Retry-After"))
		}
	}
	p.body = resp.Object(t)
	return p
}

// TestHealthReadyDatabaseRestart: /health/ready answers 503 with a reason while
// the PostgreSQL server is stopped and 200 again once it is back, without a
// restart of palmgate; /health/alive stays 200 throughout; the admin API's
// probes (with palmgate's version) likewise. The reason names no detail of the
// database (its socket directory, user or database name).
func TestHealthReadyDatabaseRestart(t *testing.T) {
	t.Parallel()
	cluster := pgtest.NewCluster(t)
	dsn := cluster.DSN(t)
	e := start(t, testserver.Options{Global: "rate_limit off",
		Storage: fmt.Sprintf("storage postgres %q {\n\tconnect_timeout 2s\n\tstatement_timeout 3s\n}", dsn)})
	admin := "http://" + e.AdminAddr + "/palmgate/health/"

	expect := func(target string, status int, bodyStatus string) probe {
		t.Helper()
		p := e.healthProbe(t, target)
		if p.status != status || p.body["status"] != bodyStatus {
			t.Errorf("GET %s: %d %s, want %d with status %q", target, p.status, p.raw, status, bodyStatus)
		}
		return p
	}
	expect("/health/alive", http.StatusOK, "ok")
	expect("/health/ready", http.StatusOK, "ok")
	expect(admin+"alive", http.StatusOK, "ok")
	if p := expect(admin+"ready", http.StatusOK, "ok"); str(p.body["version"]) == "" {
		t.Errorf("admin ready probe without the version: %s", p.raw)
	}
	if r := e.do(t, "HEAD", "/health/ready", nil); r.Status != http.StatusOK {
		t.Errorf("HEAD /health/ready: %d, want 200", r.Status)
	}
	if r := e.do(t, "POST", "/health/ready", "{}"); r.Status != http.StatusMethodNotAllowed {
		t.Errorf("POST /health/ready: %d, want 405", r.Status)
	}

	if err := cluster.Stop(); err != nil {
		t.Fatalf("stopping the database: %v", err)
	}
	stopped := time.Now()
	var down probe
	waitFor(t, "/health/ready answers 503 while the database is down", 30*time.Second, stopped, func() string {
		down = e.healthProbe(t, "/health/ready")
		if down.status != http.StatusServiceUnavailable {
			return fmt.Sprintf("%d %s", down.status, down.raw)
		}
		return ""
	})
	if down.body["status"] != "unavailable" || !strings.HasPrefix(str(down.body["reason"]), "store: ") {
		t.Errorf("ready while down: %s, want status unavailable and a reason naming the store", down.raw)
	}
	for _, secret := range []string{"host=", "dbname", "user=", "postgres", "/tmp"} {
		if strings.Contains(down.raw, secret) {
			t.Errorf("ready while down reveals %q of the DSN: %s", secret, down.raw)
		}
	}
	expect("/health/alive", http.StatusOK, "ok")
	expect(admin+"alive", http.StatusOK, "ok")
	if p := expect(admin+"ready", http.StatusServiceUnavailable, "unavailable"); !strings.HasPrefix(str(p.body["reason"]), "store: ") {
		t.Errorf("admin ready while down: %s, want a reason naming the store", p.raw)
	}

	if err := cluster.Start(); err != nil {
		t.Fatalf("starting the database again: %v", err)
	}
	waitFor(t, "/health/ready answers 200 again after the database restarted", 30*time.Second, time.Now(), func() string {
		if p := e.healthProbe(t, "/health/ready"); p.status != http.StatusOK {
			return fmt.Sprintf("%d %s", p.status, p.raw)
		}
		return ""
	})
	expect(admin+"ready", http.StatusOK, "ok")
	expect("/health/alive", http.StatusOK, "ok")
	if e.Exited() {
		t.Errorf("palmgate exited during the outage")
	}
	// The outage is logged when it begins and when it ends, not at every probe.
	log := e.Log()
	if n := strings.Count(log, "palmgate not ready"); n != 1 {
		t.Errorf("the log has %d 'not ready' lines, want 1", n)
	}
	if !strings.Contains(log, "palmgate ready again") {
		t.Errorf("the log does not say that palmgate is ready again")
	}
}

// TestExampleHealthProbes: Caddyfile.example as it ships serves both probes.
func TestExampleHealthProbes(t *testing.T) {
	t.Parallel()
	e := start(t, testserver.Options{Caddyfile: exampleCaddyfile(t)})
	for _, path := range []string{"/health/alive", "/health/ready"} {
		if p := e.healthProbe(t, path); p.status != http.StatusOK || p.body["status"] != "ok" {
			t.Errorf("GET %s on Caddyfile.example: %d %s, want 200 {\"status\":\"ok\"}", path, p.status, p.raw)
		}
	}
}
