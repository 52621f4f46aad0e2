package edge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/storage"
)

// Health probes, as Hydra has them: /health/alive answers while the process
// serves, /health/ready while the store answers too, so that a load balancer
// takes an instance out while its database is unreachable and puts it back
// when it is reachable again.
const (
	// PathAlive and PathReady are the probes' paths on the palmgate handler.
	PathAlive = "/health/alive"
	PathReady = "/health/ready"
	// ReadyTimeout bounds the store check of a readiness probe.
	ReadyTimeout = 2 * time.Second
)

// readyProbeKey is the key a readiness probe reads: no record has it (ErrNotFound
// is an answer like any other), and a read of it costs one round trip.
var readyProbeKey = []byte("health/probe")

// HealthBody is the JSON answer of the probes: Status "ok" or "unavailable",
// Reason saying which check failed (never a DSN, host or password), and
// Version, which only the admin API's probes fill in.
type HealthBody struct {
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Version string `json:"version,omitempty"`
}

// health is the state of the readiness probe: whether the last check failed,
// so that an outage is logged when it begins and when it ends, not on every probe.
type health struct {
	store storage.Store
	down  atomic.Bool
}

// CheckReady reads one key of the store within ReadyTimeout. It returns nil when
// the store answers (a missing key is an answer), else the reason to report: a
// short text that names what failed and never what the error says of the
// database (its host, user or DSN).
func CheckReady(ctx context.Context, store storage.Store) (reason string, err error) {
	if store == nil {
		return "store: not open", errors.New("no store")
	}
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	done := make(chan error, 1)
	// A store that does not honour the context (a disk that hangs) must not hold
	// the probe: it answers at the deadline, and the read ends when it may.
	go func() {
		_, err := storage.ReadKey(ctx, store, readyProbeKey)
		done <- err
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	switch {
	case err == nil || errors.Is(err, storage.ErrNotFound):
		return "", nil
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("store: no answer within %s", ReadyTimeout), err
	case errors.Is(err, storage.ErrUnavailable):
		return "store: database unavailable", err
	default:
		return "store: read failed", err
	}
}

// WriteHealth answers a probe: 200 with body, or 503 with Retry-After when
// body.Status is not "ok"; never cached.
func WriteHealth(w http.ResponseWriter, body HealthBody) {
	status := http.StatusOK
	if body.Status != "ok" {
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", strconv.Itoa(int(fault.StorageRetryAfter/time.Second)))
	}
	writeJSON(w, status, body)
}

func (s *Server) handleAlive(w http.ResponseWriter, r *http.Request) {
	WriteHealth(w, HealthBody{Status: "ok"})
}

// handleReady checks the store. A failure is logged when the outage begins and
// when it ends (an instance out of its load balancer says why, once), never as
// an error on every probe.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	reason, err := CheckReady(r.Context(), s.health.store)
	if err == nil {
		if s.health.down.Swap(false) {
			s.logger.Info("palmgate ready again: the store answers")
		}
		WriteHealth(w, HealthBody{Status: "ok"})
		return
	}
	if r.Context().Err() == nil && !s.health.down.Swap(true) {
		s.logger.Warn("palmgate not ready: the store does not answer; /health/ready answers 503 until it does",
			zap.String("reason", reason), zap.Error(err))
	}
	WriteHealth(w, HealthBody{Status: "unavailable", Reason: reason})
}
