package caddymodule

import (
	"context"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/palmgate/palmgate/core/event"
)

// newCaddyContext is a config generation's context, with its own metrics registry
// as each `caddy reload` makes.
func newCaddyContext(t *testing.T) caddy.Context {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	return ctx
}

// gathered is the value of the series name{label=value} on reg (0 when absent).
func gathered(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			match := label == ""
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					match = true
				}
			}
			if match {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestMetricsAcrossReloads: the domain metrics register on every config
// generation's registry (twice on one, for the app and a palmgate_bearer, is no
// error) and keep counting across generations; an event counts once, under its
// bounded label value.
func TestMetricsAcrossReloads(t *testing.T) {
	first := newCaddyContext(t)
	for range 2 {
		if err := registerMetrics(first); err != nil {
			t.Fatalf("registerMetrics on the first generation: %v", err)
		}
	}
	sink := newEventSink(nil)
	before := gathered(t, first.GetMetricsRegistry(), "palmgate_logins_total", "outcome", "completed")
	sink(context.Background(), event.Event{Kind: event.Login, Outcome: event.Completed, ClientID: "app"})
	second := newCaddyContext(t)
	if err := registerMetrics(second); err != nil {
		t.Fatalf("registerMetrics on the next generation: %v", err)
	}
	sink(context.Background(), event.Event{Kind: event.Login, Outcome: event.Completed, ClientID: "app"})
	if got := gathered(t, second.GetMetricsRegistry(), "palmgate_logins_total", "outcome", "completed"); got != before+2 {
		t.Errorf("palmgate_logins_total{outcome=completed} = %v on the new generation, want %v", got, before+2)
	}
	// No series carries a client's string.
	families, err := second.GetMetricsRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "client_id" || l.GetValue() == "app" {
					t.Errorf("%s has label %s=%q", f.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
}

// TestAuditLog: an event of note is one entry on palmgate.audit with its stable
// msg and fields (client_id, humanId, outcome, remote, and the agent's deviceId
// and key fingerprint); a signature check or a bearer decision is counted, not
// logged.
func TestAuditLog(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	audit := zap.New(core).Named("palmgate").Named(AuditLoggerName)
	sink := newEventSink(audit)
	ctx := event.WithRemote(context.Background(), "198.51.100.7")
	sink(ctx, event.Event{Kind: event.Login, Outcome: event.Completed, ClientID: "app", HumanID: "h-1"})
	sink(ctx, event.Event{Kind: event.RefreshReused, Outcome: event.Revoked, ClientID: "app", HumanID: "h-1"})
	sink(ctx, event.Event{Kind: event.Registration, Outcome: event.Verified, HumanID: "h-2", DeviceID: "agent-1", KeyFingerprint: "ab:cd"})
	sink(ctx, event.Event{Kind: event.ClientDeleted, ClientID: "dyn-1"})
	sink(ctx, event.Event{Kind: event.SignatureCheck, Outcome: event.Registered})
	sink(ctx, event.Event{Kind: event.Bearer, Outcome: event.Invalid})
	want := []struct {
		msg    string
		fields map[string]any
	}{
		{"login completed", map[string]any{"client_id": "app", "humanId": "h-1", "outcome": "completed", "remote": "198.51.100.7"}},
		{"refresh token reuse detected", map[string]any{"client_id": "app", "humanId": "h-1", "outcome": "revoked", "remote": "198.51.100.7"}},
		{"agent registration verified", map[string]any{"client_id": "", "humanId": "h-2", "outcome": "verified", "remote": "198.51.100.7", "deviceId": "agent-1", "key_fingerprint": "ab:cd"}},
		{"client deleted", map[string]any{"client_id": "dyn-1", "humanId": "", "outcome": "", "remote": "198.51.100.7"}},
	}
	entries := logs.All()
	if len(entries) != len(want) {
		t.Fatalf("%d entries, want %d: %+v", len(entries), len(want), entries)
	}
	for i, w := range want {
		e := entries[i]
		if e.LoggerName != "palmgate.audit" || e.Message != w.msg || e.Level != zapcore.InfoLevel {
			t.Errorf("entry %d: %s %s %q, want info on palmgate.audit %q", i, e.Level, e.LoggerName, e.Message, w.msg)
		}
		if got := e.ContextMap(); len(got) != len(w.fields) {
			t.Errorf("entry %d fields %v, want %v", i, got, w.fields)
		} else {
			for k, v := range w.fields {
				if got[k] != v {
					t.Errorf("entry %d field %s = %v, want %v", i, k, got[k], v)
				}
			}
		}
	}
}

// TestAgentTokensCounted (fourth review): an agent's token (the jwt-bearer grant)
// is a token response like the others: it counts under
// palmgate_tokens_issued_total{grant_type="jwt_bearer"}, a series present from
// the start, and its audit entry names the grant type.
func TestAgentTokensCounted(t *testing.T) {
	ctx := newCaddyContext(t)
	if err := registerMetrics(ctx); err != nil {
		t.Fatal(err)
	}
	reg := ctx.GetMetricsRegistry()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	present := false
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if f.GetName() == "palmgate_tokens_issued_total" && l.GetName() == "grant_type" && l.GetValue() == "jwt_bearer" {
					present = true
				}
			}
		}
	}
	if !present {
		t.Errorf(`palmgate_tokens_issued_total{grant_type="jwt_bearer"} is not a series before the first agent token`)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	sink := newEventSink(zap.New(core).Named("palmgate").Named(AuditLoggerName))
	before := gathered(t, reg, "palmgate_tokens_issued_total", "grant_type", "jwt_bearer")
	sink(context.Background(), event.Event{Kind: event.TokenIssued, Outcome: event.JWTBearer, ClientID: "app", HumanID: "h-1", DeviceID: "agent-1"})
	if got := gathered(t, reg, "palmgate_tokens_issued_total", "grant_type", "jwt_bearer"); got != before+1 {
		t.Errorf(`palmgate_tokens_issued_total{grant_type="jwt_bearer"} = %v after an agent's token, want %v`, got, before+1)
	}
	entries := logs.All()
	if len(entries) != 1 || entries[0].Message != "tokens issued" || entries[0].ContextMap()["outcome"] != "jwt_bearer" || entries[0].ContextMap()["deviceId"] != "agent-1" {
		t.Errorf("audit entries %+v, want one \"tokens issued\" with outcome jwt_bearer and the agent's deviceId", entries)
	}
}
