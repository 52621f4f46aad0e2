package edge

import (
	"context"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/jsontime"
	"github.com/palmgate/palmgate/core/oidc"
)

// The agents' grants on the owner's agents page (issue 24): what each agent may
// do for the verified person (application, scopes, expiry, last use), each with a
// Revoke button (POST /v1/human/agents/revoke: deviceId, clientId, csrf).

// grantRow is one grant as the page shows it.
type grantRow struct {
	DeviceID, ClientID, Application, Scopes string
	ExpiresAt                               pageTime
	LastUsed                                *pageTime // nil: never
}

// actorGrantJSON is one grant in the page's JSON form.
type actorGrantJSON struct {
	DeviceID    string         `json:"deviceId"`
	ClientID    string         `json:"clientId"`
	Application string         `json:"application"`
	Scopes      []string       `json:"scopes"`
	Resource    string         `json:"resource,omitempty"`
	ExpiresAt   jsontime.Time  `json:"expiresAt"`
	LastUsedAt  *jsontime.Time `json:"lastUsedAt,omitempty"`
}

// ownerGrants lists the verified owner's grants for the page, as rows and as JSON.
func (s *Server) ownerGrants(ctx context.Context, humanID string) ([]grantRow, []actorGrantJSON, error) {
	grants, err := s.oidc.HumanActorGrants(ctx, humanID)
	if err != nil {
		return nil, nil, err
	}
	var rows []grantRow
	var js []actorGrantJSON
	for _, g := range grants {
		app := s.oidc.ClientName(&oidc.AuthRequest{ClientID: g.ClientID})
		row := grantRow{DeviceID: g.DeviceID, ClientID: g.ClientID, Application: app, Scopes: strings.Join(g.Scopes, " "),
			ExpiresAt: dateTime(jsontime.Time(g.ExpiresAt))}
		j := actorGrantJSON{DeviceID: g.DeviceID, ClientID: g.ClientID, Application: app, Scopes: g.Scopes, Resource: g.Resource, ExpiresAt: jsontime.Time(g.ExpiresAt)}
		if !g.LastUsedAt.IsZero() {
			used := jsontime.Time(g.LastUsedAt)
			lastUsed := dateTime(used)
			row.LastUsed = &lastUsed
			j.LastUsedAt = &used
		}
		rows, js = append(rows, row), append(js, j)
	}
	return rows, js, nil
}

// handleAgentsRevoke revokes one of the verified owner's grants (form: deviceId,
// clientId, csrf): the agent gets no new token for that application, and its
// live tokens are refused. A grant that is not theirs is 404, as an unknown one.
func (s *Server) handleAgentsRevoke(w http.ResponseWriter, r *http.Request) {
	o, form, err := s.ownerFromForm(w, r)
	if err != nil {
		s.writeAgentsPageError(w, r, err)
		return
	}
	deviceID, clientID := form.Get("deviceId"), form.Get("clientId")
	if err := s.oidc.RevokeActorGrant(r.Context(), o.HumanID, deviceID, clientID); err != nil {
		s.writeAgentsPageError(w, r, err)
		return
	}
	s.logger.Info("palmgate agent grant revoked", zap.String("by", "owner"), zap.String("deviceId", deviceID),
		zap.String("clientId", clientID), zap.String("humanId", o.HumanID))
	agents, err := s.agents.HumanAgents(r.Context(), o.HumanID)
	if err != nil {
		s.writeAgentsPageError(w, r, err)
		return
	}
	if wantsJSON(r) {
		_, grants, err := s.ownerGrants(r.Context(), o.HumanID)
		if err != nil {
			s.writeAgentsPageError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, ownerPageJSON{Status: "revoked", HumanID: o.HumanID, Agents: agents, Grants: grants, ExpiresAt: &o.ExpiresAt})
		return
	}
	s.renderAgentsPage(w, r, o, agents, "Revoked what "+deviceID+" could do for you at "+s.oidc.ClientName(&oidc.AuthRequest{ClientID: clientID})+".")
}
