package caddymodule

import (
	"net/http"
	"strings"

	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/portal"
	"github.com/palmgate/palmgate/storage"
)

// The admin route that ends one person (see AdminAPI), for a stolen phone or an
// incident:
//
//	DELETE /palmgate/humans/{humanId}/sessions[?revoke=grants]
//	        end every session of the person: single sign-on, agents page, developer
//	        portal; with revoke=grants also revoke every grant they hold (the refresh
//	        and access tokens of every application, their codes not yet redeemed,
//	        their agents' grants, their consents) -> {"humanId","ssoSessions",
//	        "agentsPageSessions","portalSessions","grantsRevoked","grants",
//	        "agentGrants","consents","codes","logins"}
//
// Everything is one transaction: 503 when the store cannot be written, and then
// nothing ended. The sessions end on every instance on the store at once (each
// reads them from the store); the revoked tokens are refused at once on this
// instance and within oidc.RevocationMaxAge on the others. A humanId of no person,
// or of a person with nothing left to end, is 200 with zeros: palmgate keeps no
// record by humanId that says a person exists, and a call run again (a retry
// after a timeout) must not fail once the first has ended everything. A malformed
// humanId is 400.
//
//	GET /palmgate/humans?client_id=…&sub=…
//	        the person whose pairwise sub at that client is sub -> {"humanId"}; 404
//	        when no person holding something of the client has it (a relying
//	        party's support desk knows only the sub: the operator finds the person
//	        first, then ends them by humanId, so that both see whom they end)

// foundHuman is the answer of the lookup by sub.
type foundHuman struct {
	HumanID string `json:"humanId"`
}

// adminHumanBySubject serves GET /palmgate/humans?client_id=…&sub=….
func adminHumanBySubject(w http.ResponseWriter, r *http.Request) error {
	if err := allowOnly(w, r, http.MethodGet); err != nil {
		return err
	}
	app, err := activeApp()
	if err != nil {
		return err
	}
	return app.humanBySubject(w, r)
}

func (a *App) humanBySubject(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	h, err := a.OIDC().HumanBySubject(r.Context(), q.Get("client_id"), q.Get("sub"))
	if err != nil {
		return clientAdminError(err)
	}
	return writeAdminJSON(w, http.StatusOK, foundHuman{HumanID: h})
}

// endedHuman is the answer of the route.
type endedHuman struct {
	HumanID            string `json:"humanId"`
	SSOSessions        int    `json:"ssoSessions"`
	AgentsPageSessions int    `json:"agentsPageSessions"`
	PortalSessions     int    `json:"portalSessions"`
	GrantsRevoked      bool   `json:"grantsRevoked"`
	Grants             int    `json:"grants"`
	AgentGrants        int    `json:"agentGrants"`
	Consents           int    `json:"consents"`
	Codes              int    `json:"codes"`
	// Logins: palm scans verified before the call whose browser had not yet
	// fetched the answer, answered access_denied (no session starts from them).
	Logins int `json:"logins"`
}

// adminHumans serves /palmgate/humans/{humanId}/sessions.
func adminHumans(w http.ResponseWriter, r *http.Request) error {
	target, err := deleteTarget(w, r, "/palmgate/humans/", "{humanId}/sessions")
	if err != nil {
		return err
	}
	humanID, ok := strings.CutSuffix(target, "/sessions")
	if !ok || humanID == "" || strings.Contains(humanID, "/") {
		return adminError(http.StatusNotFound, "no such route; DELETE /palmgate/humans/{humanId}/sessions")
	}
	revoke := false
	switch v := r.URL.Query().Get("revoke"); v {
	case "":
	case "grants":
		revoke = true
	default:
		return adminError(http.StatusBadRequest, "revoke must be \"grants\" or absent, not %q", v)
	}
	app, err := activeApp()
	if err != nil {
		return err
	}
	return app.endHuman(w, r, humanID, revoke)
}

// endHuman ends humanID's sessions (and grants, with revoke) and audits it,
// naming the admin caller.
func (a *App) endHuman(w http.ResponseWriter, r *http.Request, humanID string, revoke bool) error {
	out := endedHuman{HumanID: humanID, GrantsRevoked: revoke}
	n, err := a.OIDC().EndHuman(r.Context(), humanID, oidc.EndHumanOptions{Revoke: revoke, Also: func(txn storage.Txn) error {
		var err error
		if out.AgentsPageSessions, err = a.Agents().EndHumanOwnerSessions(txn, humanID); err != nil {
			return err
		}
		out.PortalSessions, err = portal.EndSessionsTxn(txn, humanID)
		return err
	}})
	if err != nil {
		return clientAdminError(err)
	}
	out.SSOSessions, out.Grants, out.AgentGrants, out.Consents, out.Codes = n.SSOSessions, n.Grants, n.AgentGrants, n.Consents, n.Codes
	out.Logins = n.Logins
	e := event.Event{Kind: event.HumanSessionsEnded, HumanID: humanID}
	if revoke {
		e.Outcome = event.Revoked
	}
	a.Events().Emit(adminContext(r), e)
	return writeAdminJSON(w, http.StatusOK, out)
}
