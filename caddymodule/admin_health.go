package caddymodule

import (
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/palmgate/palmgate/edge"
)

// adminHealth serves the health probes on the admin API, for a monitor that
// reaches the admin endpoint rather than the sites:
//
//	GET /palmgate/health/alive   200 while the process serves
//	GET /palmgate/health/ready   200 while the store answers within 2 s, else 503
//	                             with Retry-After and the reason
//
// Both answer as /health/alive and /health/ready do, with palmgate's version;
// ready is 503 too while no palmgate app is configured.
func adminHealth(w http.ResponseWriter, r *http.Request) error {
	probe := r.URL.Path[len("/palmgate/health/"):]
	if probe != "alive" && probe != "ready" {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no health probe %q: use /palmgate/health/alive or /palmgate/health/ready", probe)}
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
	}
	body := edge.HealthBody{Status: "ok", Version: Version()}
	if probe == "ready" {
		if app, err := activeApp(); err != nil {
			body.Status, body.Reason = "unavailable", "palmgate is not configured"
		} else if reason, err := edge.CheckReady(r.Context(), app.Store()); err != nil {
			body.Status, body.Reason = "unavailable", reason
		}
	}
	edge.WriteHealth(w, body)
	return nil
}
