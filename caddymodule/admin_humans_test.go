package caddymodule

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/palmgate/palmgate/core/agent"
	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/event/eventtest"
	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/storage/memstore"
	"github.com/palmgate/palmgate/storage/storagetest"
)

// TestAdminEndHuman (fourth review): DELETE /palmgate/humans/{humanId}/sessions
// answers its counts (200 with zeros for a person with nothing to end), is an
// audit entry (outcome revoked with ?revoke=grants), answers 503 with nothing
// audited when the store is down, 400 for a malformed humanId or revoke, and
// 404/405 for other paths and methods.
func TestAdminEndHuman(t *testing.T) {
	store := &storagetest.DownStore{Store: memstore.New()}
	svc, ps := newTestOIDC(t, store, func(c *oidc.Config) { c.SSOSession = time.Hour })
	var rec eventtest.Recorder
	a := &App{store: store, oidc: svc, palm: ps, agents: agent.NewService(agent.Config{Store: store, Palm: ps, Issuer: adminIssuer}), events: rec.Sink()}
	const human = "8f1f5d3e-0000-4000-8000-000000000001"

	call := func(query string) (*httptest.ResponseRecorder, error) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("DELETE", "/palmgate/humans/"+human+"/sessions"+query, nil)
		return w, a.endHuman(w, r, human, query != "")
	}
	w, err := call("?revoke=grants")
	if err != nil || w.Code != http.StatusOK {
		t.Fatalf("end: %v, %d", err, w.Code)
	}
	var got endedHuman
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || got != (endedHuman{HumanID: human, GrantsRevoked: true}) {
		t.Errorf("answer %s (%v); want zeros for %s, grants revoked", w.Body, err, human)
	}
	if evs := rec.Take(); len(evs) != 1 || evs[0].Kind != event.HumanSessionsEnded || evs[0].HumanID != human || evs[0].Outcome != event.Revoked {
		t.Errorf("events %+v, want one HumanSessionsEnded, revoked, for %s", evs, human)
	}

	store.Down.Store(true)
	_, err = call("")
	if ae, ok := err.(caddy.APIError); !ok || ae.HTTPStatus != http.StatusServiceUnavailable {
		t.Errorf("end with the store down = %#v; want 503", err)
	}
	store.Down.Store(false)
	if evs := rec.Take(); len(evs) != 0 {
		t.Errorf("a failed end emitted %+v", evs)
	}
	if err := a.endHuman(httptest.NewRecorder(), httptest.NewRequest("DELETE", "/", nil), "not-a-uuid", false); !isStatus(err, http.StatusBadRequest) {
		t.Errorf("malformed humanId: %v; want 400", err)
	}

	w = httptest.NewRecorder()
	if err := a.humanBySubject(w, httptest.NewRequest("GET", "/palmgate/humans?client_id=nope&sub=x", nil)); !isStatus(err, http.StatusNotFound) {
		t.Errorf("lookup by the sub of an unknown client: %v; want 404", err)
	}
	if err := a.humanBySubject(w, httptest.NewRequest("GET", "/palmgate/humans", nil)); !isStatus(err, http.StatusBadRequest) {
		t.Errorf("lookup without client_id and sub: %v; want 400", err)
	}
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{"DELETE", "/palmgate/humans/" + human + "/sessions?revoke=all", http.StatusBadRequest},
		{"DELETE", "/palmgate/humans/" + human, http.StatusNotFound},
		{"DELETE", "/palmgate/humans/" + human + "/tokens", http.StatusNotFound},
		{"DELETE", "/palmgate/humans/", http.StatusNotFound},
		{"DELETE", "/palmgate/humans/a/b/sessions", http.StatusNotFound},
		{"GET", "/palmgate/humans/" + human + "/sessions", http.StatusMethodNotAllowed},
	} {
		err := adminHumans(httptest.NewRecorder(), httptest.NewRequest(c.method, c.path, nil))
		if !isStatus(err, c.status) {
			t.Errorf("%s %s: %v; want %d", c.method, c.path, err, c.status)
		}
	}
}

func isStatus(err error, status int) bool {
	ae, ok := err.(caddy.APIError)
	return ok && ae.HTTPStatus == status
}

// TestPeopleSignedOutCounted: the operator signing a person out is counted, as
// the agents removed are, whatever it revoked.
func TestPeopleSignedOutCounted(t *testing.T) {
	ctx := newCaddyContext(t)
	if err := registerMetrics(ctx); err != nil {
		t.Fatal(err)
	}
	before := gathered(t, ctx.GetMetricsRegistry(), "palmgate_people_signed_out_total", "", "")
	sink := newEventSink(nil)
	sink(context.Background(), event.Event{Kind: event.HumanSessionsEnded, HumanID: "h-1"})
	sink(context.Background(), event.Event{Kind: event.HumanSessionsEnded, HumanID: "h-1", Outcome: event.Revoked})
	if got := gathered(t, ctx.GetMetricsRegistry(), "palmgate_people_signed_out_total", "", ""); got != before+2 {
		t.Errorf("palmgate_people_signed_out_total = %v, want %v", got, before+2)
	}
}
