package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/event/eventtest"
	"github.com/palmgate/palmgate/storage/memstore"
)

// TestPortalSessionsEndedAudited (fourth review): the operator ending a
// developer's portal sessions (a stolen cookie, a developer let go) is an audit
// entry naming the developer and the admin caller; a refused request is none.
func TestPortalSessionsEndedAudited(t *testing.T) {
	var rec eventtest.Recorder
	a := &App{store: memstore.New(), events: rec.Sink()}
	const owner = "8f1f5d3e-0000-4000-8000-000000000001"
	w := httptest.NewRecorder()
	r := httptest.NewRequest("DELETE", "/palmgate/portal/sessions/"+owner, nil)
	r.RemoteAddr = "192.0.2.9:4321"
	if err := a.endPortalSessions(w, r, owner); err != nil || w.Code != http.StatusOK {
		t.Fatalf("end-sessions: %v, %d", err, w.Code)
	}
	got := rec.Take()
	if len(got) != 1 || got[0].Kind != event.PortalSessionsEnded || got[0].HumanID != owner {
		t.Errorf("events %+v, want one PortalSessionsEnded for %s", got, owner)
	}
	if err := a.endPortalSessions(httptest.NewRecorder(), r, "not-a-uuid"); err == nil {
		t.Error("a malformed owner was accepted")
	}
	if got := rec.Take(); len(got) != 0 {
		t.Errorf("a refused request emitted %+v", got)
	}
}
