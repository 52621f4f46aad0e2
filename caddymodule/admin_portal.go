package caddymodule

import (
	"net/http"

	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/portal"
)

// The admin route of the developer portal's sessions (see AdminAPI):
//
//	DELETE /palmgate/portal/sessions/{owner}   end every portal session of the
//	                                           developer owner (a client's "owner")
//	                                           -> {"owner","ended"}
//
// The sessions end on every instance on the store at once: each portal request
// reads its session from the store. The developer can sign in again.

// endedSessions is the answer of the route.
type endedSessions struct {
	Owner string `json:"owner"`
	Ended int    `json:"ended"`
}

// adminPortalSessions serves /palmgate/portal/sessions/{owner}.
func adminPortalSessions(w http.ResponseWriter, r *http.Request) error {
	owner, err := deleteTarget(w, r, "/palmgate/portal/sessions/", "{owner}")
	if err != nil {
		return err
	}
	app, err := activeApp()
	if err != nil {
		return err
	}
	return app.endPortalSessions(w, r, owner)
}

// endPortalSessions ends owner's portal sessions and audits it, naming the admin
// caller.
func (a *App) endPortalSessions(w http.ResponseWriter, r *http.Request, owner string) error {
	n, err := portal.EndSessions(r.Context(), a.Store(), owner)
	if err != nil {
		return clientAdminError(err)
	}
	a.Events().Emit(adminContext(r), event.Event{Kind: event.PortalSessionsEnded, HumanID: owner})
	return writeAdminJSON(w, http.StatusOK, endedSessions{Owner: owner, Ended: n})
}
