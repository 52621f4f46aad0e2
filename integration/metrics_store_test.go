package integration

// The store, cache and pending metrics of a real Caddy on PostgreSQL, scraped from
// the admin endpoint's /metrics (Caddy's registry, beside caddy_http_*).

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/pgtest"
	"github.com/palmgate/palmgate/internal/testserver"
)

// scrapedSeries is one line of the Prometheus text format.
type scrapedSeries struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape is a parsed GET of the admin /metrics.
type scrape []scrapedSeries

// scrapeMetrics gets and parses e's admin /metrics.
func scrapeMetrics(t *testing.T, e *env) scrape {
	t.Helper()
	resp := testserver.Do(t, "GET", "http://"+e.AdminAddr+"/metrics", nil).ExpectStatus(t, http.StatusOK)
	var out scrape
	sc := bufio.NewScanner(bytes.NewReader(resp.Body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		s := scrapedSeries{labels: map[string]string{}, value: v}
		head := line[:sp]
		name, rest, hasLabels := strings.Cut(head, "{")
		s.name = name
		if hasLabels {
			for _, pair := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
				if k, v, ok := strings.Cut(pair, "="); ok {
					s.labels[k] = strings.Trim(v, `"`)
				}
			}
		}
		out = append(out, s)
	}
	return out
}

// value returns the series name{labels...} (name=value pairs) and whether it exists.
func (s scrape) value(name string, labels ...string) (float64, bool) {
series:
	for _, m := range s {
		if m.name != name {
			continue
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if m.labels[labels[i]] != labels[i+1] {
				continue series
			}
		}
		return m.value, true
	}
	return 0, false
}

// must returns the series name{labels...}, failing the test when it is missing.
func (s scrape) must(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	v, ok := s.value(name, labels...)
	if !ok {
		t.Fatalf("no series %s%v in the admin /metrics", name, labels)
	}
	return v
}

// cacheCounts returns a cache's hits and misses.
func (s scrape) cacheCounts(t *testing.T, cache string) (hits, misses float64) {
	t.Helper()
	return s.must(t, "palmgate_cache_requests_total", "cache", cache, "result", "hit"),
		s.must(t, "palmgate_cache_requests_total", "cache", cache, "result", "miss")
}

// TestStoreMetricsPostgres: after traffic, the admin /metrics of an instance on
// PostgreSQL has store operation durations, a grouped commit of several Updates
// under concurrent writes, the registered-key cache moving by exactly one miss then
// one hit when a known agent's signature is checked twice, and the pending gauges
// moving by exactly one per /oauth2/authorize and per registration init. After a
// reload, the store's series go on and the cache series are the new app's.
func TestStoreMetricsPostgres(t *testing.T) {
	t.Parallel()
	c := newOIDCClient("metrics-app", "")
	storageLine := fmt.Sprintf("storage postgres %q", pgtest.DSN(t))
	global := "rate_limit off\n" + c.config()
	e := start(t, testserver.Options{Global: global, Storage: storageLine})

	a := newAgent(t, "metrics-agent-"+randHex(4))
	e.register(t, a, e.subject("metrics"))

	// A known agent's signature checked twice: the first reads the key index
	// from the store, the second is answered from memory.
	const keysCache = "agent_registered_keys"
	check := func() {
		t.Helper()
		m := e.do(t, "POST", "/v1/agent/verify/signature", a.sign("metrics "+randHex(4), time.Now().UnixMilli())).ExpectStatus(t, http.StatusOK).Object(t)
		if m["verified"] != true || m["registered"] != true {
			t.Fatalf("verify/signature: %v", m)
		}
	}
	hits0, misses0 := scrapeMetrics(t, e).cacheCounts(t, keysCache)
	check()
	hits1, misses1 := scrapeMetrics(t, e).cacheCounts(t, keysCache)
	check()
	hits2, misses2 := scrapeMetrics(t, e).cacheCounts(t, keysCache)
	if hits1-hits0 != 0 || misses1-misses0 != 1 {
		t.Errorf("first check of a known agent: %s moved by %v hits, %v misses; want 0, 1", keysCache, hits1-hits0, misses1-misses0)
	}
	if hits2-hits1 != 1 || misses2-misses1 != 0 {
		t.Errorf("second check: %s moved by %v hits, %v misses; want 1, 0", keysCache, hits2-hits1, misses2-misses1)
	}
	for _, cache := range []string{"agent_records", "agent_valid_keys", "leaderboard", "bearer_tokens"} {
		scrapeMetrics(t, e).cacheCounts(t, cache) // present
	}

	// One authorize, one registration init: each pending gauge moves by one.
	before := scrapeMetrics(t, e)
	e.authorize(t, e.authURL(c))
	e.initSession(t, newAgent(t, "metrics-pending-"+randHex(4)).registration(time.Now()))
	after := scrapeMetrics(t, e)
	for _, purpose := range []string{"login", "agent_registration"} {
		got := after.must(t, "palmgate_pending_challenges", "purpose", purpose) - before.must(t, "palmgate_pending_challenges", "purpose", purpose)
		if got != 1 {
			t.Errorf("pending %s challenges moved by %v after one request, want 1", purpose, got)
		}
		if limit := after.must(t, "palmgate_pending_challenges_limit", "purpose", purpose); limit != 50000 {
			t.Errorf("pending %s limit %v, want the default 50000", purpose, limit)
		}
	}

	// Operation durations, by op.
	for _, op := range []string{"view", "update", "read_key"} {
		if n := after.must(t, "palmgate_store_operation_duration_seconds_count", "backend", "postgres", "op", op); n == 0 {
			t.Errorf("no %s duration observed", op)
		}
	}
	if _, ok := after.value("palmgate_store_conflict_retries_total", "backend", "postgres"); !ok {
		t.Error("no palmgate_store_conflict_retries_total{backend=postgres}")
	}

	// Every label value of these series is one of a fixed set: nothing a client
	// sends (a deviceId, a key, a client_id, an address) becomes a series.
	allowed := map[string][]string{
		"backend": {"badger", "postgres"},
		"op":      {"view", "update", "read_key"},
		"reason":  {"conflict", "iterate", "failed_group", "fn_error", "panic"},
		"cache":   {"agent_registered_keys", "agent_records", "agent_valid_keys", "agent_absent_keys", "leaderboard", "bearer_tokens"},
		"result":  {"hit", "miss"},
		"purpose": {"login", "agent_registration"},
	}
	for _, m := range after {
		if !strings.HasPrefix(m.name, "palmgate_store_") && !strings.HasPrefix(m.name, "palmgate_cache_") && !strings.HasPrefix(m.name, "palmgate_pending_") {
			continue
		}
		for k, v := range m.labels {
			if k != "le" && !slices.Contains(allowed[k], v) {
				t.Errorf("%s has label %s=%q, not one of %v", m.name, k, v, allowed[k])
			}
		}
	}

	// Concurrent writes share grouped commits: some group holds more than one
	// Update. Bursts of concurrent authorizations, until one is seen.
	grouped := func(s scrape) float64 {
		return s.must(t, "palmgate_store_group_commit_size_count", "backend", "postgres") -
			s.must(t, "palmgate_store_group_commit_size_bucket", "backend", "postgres", "le", "1")
	}
	for burst := 0; grouped(scrapeMetrics(t, e)) == 0; burst++ {
		t.Logf("burst %d of concurrent authorizations", burst+1)
		if burst == 10 {
			t.Fatal("10 bursts of 32 concurrent authorizations and no group commit of more than one Update")
		}
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() { // t.Errorf only: not the test's goroutine
				resp, err := testserver.Client.Get(e.authURL(c))
				if err != nil {
					t.Errorf("authorize: %v", err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusFound {
					t.Errorf("authorize: status %d, want 302", resp.StatusCode)
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}

	// A reload: the store's series go on (the store is shared across config
	// generations), the cache series are the new app's.
	updates := scrapeMetrics(t, e).must(t, "palmgate_store_operation_duration_seconds_count", "backend", "postgres", "op", "update")
	e.Reload(t, global+"\naccess_token_ttl 30m")
	reloaded := scrapeMetrics(t, e)
	if got := reloaded.must(t, "palmgate_store_operation_duration_seconds_count", "backend", "postgres", "op", "update"); got < updates {
		t.Errorf("update durations %v after the reload, fewer than the %v before", got, updates)
	}
	if hits, misses := reloaded.cacheCounts(t, keysCache); hits != 0 || misses != 0 {
		t.Errorf("%s after the reload: %v hits, %v misses; want the new app's 0, 0", keysCache, hits, misses)
	}
	check()
	if hits, misses := scrapeMetrics(t, e).cacheCounts(t, keysCache); hits != 0 || misses != 1 {
		t.Errorf("%s after a check on the new app: %v hits, %v misses; want 0, 1", keysCache, hits, misses)
	}
}
