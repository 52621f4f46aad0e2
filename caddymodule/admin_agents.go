package caddymodule

import (
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/agent"
	"github.com/palmgate/palmgate/core/jsontime"
)

// The admin route of agents (see AdminAPI):
//
//	DELETE /palmgate/agents/{deviceId}   remove the agent: it answers registered:false
//	                                     on lookups and signature checks at once on this
//	                                     instance and within agent.RemovalMaxAge on every
//	                                     other one on the store, and leaves the
//	                                     leaderboard -> {"deviceId","humanId","registeredAt"}
//
// An unknown deviceId is 404, a malformed one 400. The deviceId and its key may
// be registered again afterwards (a new init and palm verification).

// Agents is the agent registry.
func (a *App) Agents() *agent.Service { return a.agents }

// removedAgent is the answer of the route.
type removedAgent struct {
	DeviceID     string        `json:"deviceId"`
	HumanID      string        `json:"humanId"`
	RegisteredAt jsontime.Time `json:"registeredAt"`
}

// adminAgents serves /palmgate/agents/{deviceId}.
func adminAgents(w http.ResponseWriter, r *http.Request) error {
	deviceID, err := deleteTarget(w, r, "/palmgate/agents/", "{deviceId}")
	if err != nil {
		return err
	}
	app, err := activeApp()
	if err != nil {
		return err
	}
	// Its grants to act for its human go with it (issue 24, the registry's
	// OnRemoved hook): its live tokens are refused at once. When that fails, the
	// removal still stands (core/agent's removed_hook.go).
	// adminContext: the audit entry names the admin caller's address, as the
	// other admin routes' do.
	removed, err := app.Agents().Remove(adminContext(r), deviceID)
	if removed == nil {
		return clientAdminError(err)
	}
	app.logger.Info("palmgate agent removed",
		zap.String("by", "operator"), zap.String("deviceId", removed.DeviceID), zap.String("humanId", removed.HumanID))
	if err != nil {
		app.logger.Warn("palmgate: after removing an agent", zap.String("deviceId", removed.DeviceID), zap.Error(err))
	}
	return writeAdminJSON(w, http.StatusOK, removedAgent{DeviceID: removed.DeviceID, HumanID: removed.HumanID, RegisteredAt: removed.RegisteredAt})
}

// deleteTarget is the last path segment of an admin route that only deletes
// (DELETE prefix+name), or the route's 404 or 405.
func deleteTarget(w http.ResponseWriter, r *http.Request, prefix, name string) (string, error) {
	target, ok := strings.CutPrefix(r.URL.Path, prefix)
	if !ok || target == "" {
		return "", adminError(http.StatusNotFound, "no such route; DELETE %s%s", prefix, name)
	}
	if err := allowOnly(w, r, http.MethodDelete); err != nil {
		return "", err
	}
	return target, nil
}
