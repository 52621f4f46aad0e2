package caddymodule

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/palmgate/palmgate/edge/backchannel"
)

// Back-channel logout (OpenID Connect Back-Channel Logout 1.0): core/oidc signs
// the logout tokens, edge/backchannel delivers them; the app builds the sender in
// Provision (no goroutine), starts its workers in Start and stops them in Stop
// and Cleanup, so that a reload or a discarded config leaves none behind. Each
// outcome is counted on palmgate_backchannel_logouts_total{outcome}; a failed
// delivery is an audit line, a dropped one a warning, each naming the client,
// never the token.

// newBackchannelCounter is palmgate_backchannel_logouts_total (initMetrics
// registers it with the domain metrics), every series from 0.
func newBackchannelCounter() *prometheus.CounterVec {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "palmgate_backchannel_logouts_total",
		Help: "Back-channel logout tokens by outcome: sent (answered 200 or 204), failed (after one retry on a network error or 5xx), dropped (the queue was full, or palmgate stopped)."},
		[]string{"outcome"})
	for _, o := range []string{backchannel.Sent, backchannel.Failed, backchannel.Dropped} {
		vec.WithLabelValues(o)
	}
	return vec
}

// backchannelSender builds the sender of the app's logout tokens.
func (a *App) backchannelSender() *backchannel.Sender {
	initMetrics()
	counter := metrics.backchannel
	audit, logger := a.logger.Named(AuditLoggerName), a.logger
	allowPrivate := a.ClientMetadataDocuments != nil && a.ClientMetadataDocuments.AllowPrivate
	return backchannel.New(backchannel.Config{
		AllowPrivate: allowPrivate,
		Report: func(clientID, outcome string, reason error) {
			counter.WithLabelValues(outcome).Inc()
			switch outcome {
			case backchannel.Failed:
				audit.Info("backchannel logout failed", zap.String("client_id", clientID), zap.String("outcome", outcome), zap.Error(reason))
			case backchannel.Dropped:
				logger.Warn("backchannel logout dropped", zap.String("client_id", clientID), zap.Error(reason))
			}
		},
	})
}

// newBackchannel builds the app's sender (a.backchannel) and returns it.
func (a *App) newBackchannel() *backchannel.Sender {
	a.backchannel = a.backchannelSender()
	return a.backchannel
}
