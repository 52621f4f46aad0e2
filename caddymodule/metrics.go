package caddymodule

import (
	"context"
	"errors"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/event"
)

// The domain metrics: what palmgate did, counted by kind and outcome. Their label
// values are core/event's fixed outcomes, never a client's string (no client_id:
// that is the audit log's job). They live once per process, like Caddy's own
// (reverse_proxy's upstreams gauge is the model), so that a config reload keeps
// counting; each config generation registers them on its metrics registry, the
// one the admin endpoint's /metrics serves beside caddy_http_*.

// domainMetric is one counter family: its name, help, label, and the outcomes
// (label values) of the event kinds it counts.
type domainMetric struct {
	name, help, label string
	kinds             []event.Kind
	outcomes          []event.Outcome // without a label: any outcome counts
}

var domainMetrics = []domainMetric{
	{"palmgate_logins_total", "OpenID Connect logins by outcome: started (authorize), completed (a code was released), denied or expired (access_denied was).",
		"outcome", []event.Kind{event.Login}, []event.Outcome{event.Started, event.Completed, event.Denied, event.Expired}},
	{"palmgate_palm_assertions_total", "Palm assertions and denials posted for challenges, by outcome (refused: bad signature, unknown attestor, wrong claims or malformed; replayed: the challenge had already ended).",
		"outcome", []event.Kind{event.PalmAssertion}, []event.Outcome{event.Verified, event.Denied, event.Refused, event.Replayed, event.Expired}},
	{"palmgate_tokens_issued_total", "Token responses issued, by grant type (jwt_bearer: an agent's token).",
		"grant_type", []event.Kind{event.TokenIssued}, []event.Outcome{event.AuthorizationCode, event.RefreshToken, event.JWTBearer}},
	{"palmgate_refresh_reuse_detected_total", "Rotated refresh tokens presented again (each revoked its family).",
		"", []event.Kind{event.RefreshReused}, []event.Outcome{event.Revoked}},
	{"palmgate_codes_reused_total", "Authorization codes presented again (each revoked its grant).",
		"", []event.Kind{event.CodeReused}, []event.Outcome{event.Revoked}},
	{"palmgate_agent_registrations_total", "Agent registrations by outcome: started (init), verified (registered), failed (deviceId or key registered meanwhile), denied (the owner declined).",
		"outcome", []event.Kind{event.Registration}, []event.Outcome{event.Started, event.Verified, event.Failed, event.Denied}},
	{"palmgate_signature_checks_total", "Agent signature checks by result: registered (good signature of the registered key), unregistered (good signature, key not registered under that deviceId), bad_signature.",
		"result", []event.Kind{event.SignatureCheck}, []event.Outcome{event.Registered, event.Unregistered, event.BadSignature}},
	{"palmgate_logouts_total", "RP-initiated logouts by outcome: revoked (the hint named a grant) or no_session.",
		"outcome", []event.Kind{event.Logout}, []event.Outcome{event.Revoked, event.NoSession}},
	{"palmgate_bearer_decisions_total", "palmgate_bearer decisions by outcome.",
		"outcome", []event.Kind{event.Bearer}, []event.Outcome{event.Allowed, event.Missing, event.Invalid, event.Expired, event.InsufficientScope, event.Revoked, event.Unavailable}},
	{"palmgate_key_rotations_total", "Signing key rotations, by trigger (scheduled or manual).",
		"trigger", []event.Kind{event.KeysRotated}, []event.Outcome{event.Scheduled, event.Manual}},
	{"palmgate_agents_removed_total", "Agents removed, by the operator or their human.",
		"", []event.Kind{event.AgentRemoved}, []event.Outcome{event.None}},
	{"palmgate_people_signed_out_total", "People the operator signed out everywhere (DELETE /palmgate/humans/{humanId}/sessions), with or without their grants.",
		"", []event.Kind{event.HumanSessionsEnded}, []event.Outcome{event.None, event.Revoked}},
}

// adminActions count the changes of dynamic clients, by action.
var adminActions = map[event.Kind]string{
	event.ClientCreated: "client_created", event.ClientUpdated: "client_updated",
	event.ClientSecretRotated: "client_secret_rotated", event.ClientDeleted: "client_deleted",
}

// metrics holds the process's counters: counter[kind][outcome] (nil where that
// pair is not counted), so that counting an event is an index and an Inc.
var metrics struct {
	once       sync.Once
	collectors []prometheus.Collector
	counter    [event.NumKinds][event.NumOutcomes]prometheus.Counter
	// backchannel counts back-channel logouts by outcome (backchannel.go).
	backchannel *prometheus.CounterVec
}

func initMetrics() {
	metrics.once.Do(func() {
		for _, m := range domainMetrics {
			if m.label == "" {
				c := prometheus.NewCounter(prometheus.CounterOpts{Name: m.name, Help: m.help})
				metrics.collectors = append(metrics.collectors, c)
				for _, k := range m.kinds {
					for o := range event.NumOutcomes { // whatever the outcome
						metrics.counter[k][o] = c
					}
				}
				continue
			}
			vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: m.name, Help: m.help}, []string{m.label})
			metrics.collectors = append(metrics.collectors, vec)
			for _, k := range m.kinds {
				for _, o := range m.outcomes {
					metrics.counter[k][o] = vec.WithLabelValues(o.String())
				}
			}
		}
		vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "palmgate_client_changes_total",
			Help: "Changes of dynamic clients (admin API or developer portal), by action."}, []string{"action"})
		metrics.collectors = append(metrics.collectors, vec)
		for k, action := range adminActions {
			c := vec.WithLabelValues(action)
			for o := range event.NumOutcomes {
				metrics.counter[k][o] = c
			}
		}
		metrics.backchannel = newBackchannelCounter()
		metrics.collectors = append(metrics.collectors, metrics.backchannel)
	})
}

// registerMetrics registers the domain metrics on the config generation's
// registry; registering them again (the app and a palmgate_bearer of one config)
// is no error.
func registerMetrics(ctx caddy.Context) error {
	initMetrics()
	reg := ctx.GetMetricsRegistry()
	if reg == nil {
		return nil
	}
	for _, c := range metrics.collectors {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) || are.ExistingCollector != c {
				return err
			}
		}
	}
	return nil
}

// count counts e (a kind or outcome that no metric counts is ignored).
func count(e event.Event) {
	if e.Kind < event.NumKinds && e.Outcome < event.NumOutcomes {
		if c := metrics.counter[e.Kind][e.Outcome]; c != nil {
			c.Inc()
		}
	}
}

// newEventSink returns the sink of the app's services: it counts each event and
// writes those of note to the audit log.
func newEventSink(audit *zap.Logger) event.Sink {
	initMetrics()
	return func(ctx context.Context, e event.Event) {
		count(e)
		auditLog(ctx, audit, e)
	}
}

// remoteAddr is the client address of the request ctx belongs to, as Caddy
// determined it (honouring trusted_proxies), or the one event.WithRemote set.
func remoteAddr(ctx context.Context) string {
	if ip, ok := caddyhttp.GetVar(ctx, caddyhttp.ClientIPVarKey).(string); ok && ip != "" {
		return ip
	}
	return event.Remote(ctx)
}
