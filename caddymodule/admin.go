package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/palmgate/palmgate/core/records"
	"github.com/palmgate/palmgate/storage"
)

func init() {
	caddy.RegisterModule(AdminAPI{})
}

// AdminAPI adds palmgate's routes to Caddy's admin endpoint:
//
//	GET  /palmgate/keys          the signing keys: active, retired, when each drops
//	POST /palmgate/keys/rotate   new active signing keys (RS256, ES256, EdDSA, or one);
//	                             the old ones stay in the JWKS until their tokens
//	                             expire (admin_keys.go)
//	GET  /palmgate/stats         palmgate's version and live record counts by kind (a
//	                             full scan: for operators and tests, not for monitoring
//	                             at high rates)
//	GET  /palmgate/health/alive|ready
//	                             the health probes, with the version (admin_health.go)
//	/palmgate/clients[/...]      the clients: list, show, create, update, rotate the
//	                             secret of and delete (admin_clients.go)
//	DELETE /palmgate/portal/sessions/{owner}
//	                             end a developer's portal sessions (admin_portal.go)
//	DELETE /palmgate/humans/{humanId}/sessions[?revoke=grants]
//	                             end a person's every session, and revoke their
//	                             grants (admin_humans.go)
//	GET  /palmgate/humans?client_id=&sub=
//	                             the humanId of a client's pairwise sub
//	GET  /palmgate/backup        stream a backup of the store (admin_backup.go)
//	DELETE /palmgate/agents/{deviceId}
//	                             remove an agent (admin_agents.go)
type AdminAPI struct{}

// CaddyModule returns the Caddy module information.
func (AdminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.palmgate",
		New: func() caddy.Module { return new(AdminAPI) },
	}
}

// Routes returns the admin routes.
func (AdminAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{
		{Pattern: "/palmgate/keys", Handler: caddy.AdminHandlerFunc(adminKeys)},
		{Pattern: "/palmgate/keys/rotate", Handler: caddy.AdminHandlerFunc(rotateKeys)},
		{Pattern: "/palmgate/stats", Handler: caddy.AdminHandlerFunc(stats)},
		{Pattern: "/palmgate/clients", Handler: caddy.AdminHandlerFunc(adminClients)},
		{Pattern: "/palmgate/clients/", Handler: caddy.AdminHandlerFunc(adminClients)},
		{Pattern: "/palmgate/portal/sessions/", Handler: caddy.AdminHandlerFunc(adminPortalSessions)},
		{Pattern: "/palmgate/humans", Handler: caddy.AdminHandlerFunc(adminHumanBySubject)},
		{Pattern: "/palmgate/humans/", Handler: caddy.AdminHandlerFunc(adminHumans)},
		{Pattern: "/palmgate/health/", Handler: caddy.AdminHandlerFunc(adminHealth)},
		{Pattern: "/palmgate/backup", Handler: caddy.AdminHandlerFunc(adminBackup)},
		{Pattern: "/palmgate/agents/", Handler: caddy.AdminHandlerFunc(adminAgents)},
	}
}

// activeApp returns the palmgate app of the running config.
func activeApp() (*App, error) {
	app, err := caddy.ActiveContext().AppIfConfigured("palmgate")
	if err != nil {
		return nil, caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("palmgate is not configured: %w", err)}
	}
	return app.(*App), nil
}

// allowOnly refuses a request whose method is not method: 405 naming it in
// Allow, as RFC 9110 15.5.6 requires.
func allowOnly(w http.ResponseWriter, r *http.Request, method string) error {
	if r.Method == method {
		return nil
	}
	w.Header().Set("Allow", method)
	return adminError(http.StatusMethodNotAllowed, "method %s not allowed; %s", r.Method, method)
}

func stats(w http.ResponseWriter, r *http.Request) error {
	if err := allowOnly(w, r, http.MethodGet); err != nil {
		return err
	}
	app, err := activeApp()
	if err != nil {
		return err
	}
	return serveStats(w, r, app.Store())
}

// serveStats answers the record counts of store: 503 while it cannot be read.
func serveStats(w http.ResponseWriter, r *http.Request, store storage.Store) error {
	counts, err := storage.CountByKind(r.Context(), store, records.Kind)
	if err != nil {
		return clientAdminError(err)
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(map[string]any{"version": Version(), "records": counts})
}

// Interface guard
var _ caddy.AdminRouter = AdminAPI{}
