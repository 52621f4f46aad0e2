package edge_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/palmgate/palmgate/edge"
	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/storagetest"
)

// wantHealth checks a probe's answer: status, body status (and reason), no-store.
func wantHealth(t *testing.T, w *recorder, status int, bodyStatus, reason string) {
	t.Helper()
	wantStatus(t, w, status)
	if cc := w.Header().Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store", cc)
	}
	m := decode(t, w)
	if m["status"] != bodyStatus {
		t.Errorf("status = %v, want %s; body %s", m["status"], bodyStatus, w.Body)
	}
	if got, _ := m["reason"].(string); got != reason {
		t.Errorf("reason = %q, want %q", got, reason)
	}
	if _, ok := m["version"]; ok {
		t.Errorf("a public probe tells the version: %s", w.Body)
	}
	if status == http.StatusServiceUnavailable {
		wantRetryAfter(t, w)
	} else if ra := w.Header().Get("Retry-After"); ra != "" {
		t.Errorf("Retry-After %q on a %d", ra, status)
	}
}

// TestHealthProbes: /health/alive answers 200 whatever the store does;
// /health/ready answers 503 with a reason and Retry-After while the store is
// down (the reason names no detail of the store's error) and 200 again once it
// is back; both GET and HEAD only, never rate limited.
func TestHealthProbes(t *testing.T) {
	e := newEnv(t, withRateLimit(1))
	for range 3 { // more probes than the rate limit allows writes: probes are not counted
		wantHealth(t, e.get(t, "/health/alive"), http.StatusOK, "ok", "")
		wantHealth(t, e.get(t, "/health/ready"), http.StatusOK, "ok", "")
	}
	e.store.Down.Store(true)
	wantHealth(t, e.get(t, "/health/alive"), http.StatusOK, "ok", "")
	w := e.get(t, "/health/ready")
	wantHealth(t, w, http.StatusServiceUnavailable, "unavailable", "store: database unavailable")
	if strings.Contains(w.Body.String(), "connection refused") {
		t.Errorf("the reason repeats the store's error: %s", w.Body)
	}
	e.store.Down.Store(false)
	wantHealth(t, e.get(t, "/health/ready"), http.StatusOK, "ok", "")

	for _, p := range []string{"/health/alive", "/health/ready"} {
		if w := e.do(t, req{method: http.MethodHead, target: p}); w.Code != http.StatusOK {
			t.Errorf("HEAD %s = %d, want 200", p, w.Code)
		}
		w := e.do(t, req{method: http.MethodPost, target: p, body: "{}", contentType: "application/json"})
		wantV1Error(t, w, http.StatusMethodNotAllowed, "method_not_allowed", "")
		if allow := w.Header().Get("Allow"); allow != "GET, HEAD" { // the probes take HEAD too (fourth review)
			t.Errorf("POST %s: Allow %q, want GET, HEAD", p, allow)
		}
	}
}

// TestHealthReadyLogsTransitions: an outage is logged once when it begins and
// once when it ends, not at every probe, and never as an error.
func TestHealthReadyLogsTransitions(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	store := &storagetest.DownStore{Store: newEnv(t).store.Store}
	srv := edge.New(edge.Config{Issuer: testIssuer, Store: store, Logger: zap.New(core)})
	probe := func() int {
		w := (&testEnv{srv: srv}).get(t, "/health/ready")
		return w.Code
	}
	for range 3 {
		probe()
	}
	store.Down.Store(true)
	for range 5 {
		if c := probe(); c != http.StatusServiceUnavailable {
			t.Fatalf("probe while down = %d, want 503", c)
		}
	}
	store.Down.Store(false)
	for range 3 {
		probe()
	}
	var msgs []string
	for _, l := range logs.All() {
		if l.Level >= zapcore.ErrorLevel {
			t.Errorf("logged at %s: %s", l.Level, l.Message)
		}
		msgs = append(msgs, l.Level.String()+": "+l.Message)
	}
	if len(msgs) != 2 || !strings.HasPrefix(msgs[0], "warn: palmgate not ready") || !strings.HasPrefix(msgs[1], "info: palmgate ready again") {
		t.Errorf("log = %q, want one warning when the outage begins and one line when it ends", msgs)
	}
}

// hangingStore never answers a read before its context ends, as a database
// server that accepts connections and says nothing.
type hangingStore struct{ storage.Store }

func (s hangingStore) View(ctx context.Context, _ func(storage.Txn) error) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestHealthReadyTimeout: a store that does not answer makes the probe answer
// 503 after edge.ReadyTimeout, not hang with it.
func TestHealthReadyTimeout(t *testing.T) {
	srv := edge.New(edge.Config{Issuer: testIssuer, Store: hangingStore{}})
	began := time.Now()
	w := (&testEnv{srv: srv}).get(t, "/health/ready")
	wantHealth(t, w, http.StatusServiceUnavailable, "unavailable", "store: no answer within 2s")
	if took := time.Since(began); took < edge.ReadyTimeout {
		t.Errorf("answered after %s, before the %s timeout", took, edge.ReadyTimeout)
	}
}

// TestHealthReadyWithoutStore: a server built without a store is never ready.
func TestHealthReadyWithoutStore(t *testing.T) {
	w := (&testEnv{srv: edge.New(edge.Config{Issuer: testIssuer})}).get(t, "/health/ready")
	wantHealth(t, w, http.StatusServiceUnavailable, "unavailable", "store: not open")
}
