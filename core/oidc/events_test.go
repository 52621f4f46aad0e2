package oidc

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/event/eventtest"
	"github.com/palmgate/palmgate/storage/memstore"
)

// wantEvents checks that rec received exactly want since its last Take.
func wantEvents(t *testing.T, rec *eventtest.Recorder, step string, want ...event.Event) {
	t.Helper()
	got := rec.Take()
	if len(got) != len(want) {
		t.Fatalf("%s: events = %+v\nwant %+v", step, got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s: event %d = %+v, want %+v", step, i, got[i], want[i])
		}
	}
}

// TestEvents: logins (started, completed, denied, expired), token grants by
// grant type, a reused code, a reused refresh token, a logout and the changes of
// a dynamic client are each one event, emitted once after the commit, on a store
// that runs every transaction twice (an event emitted inside a transaction's fn
// would be counted twice, or for a transaction that never committed).
func TestEvents(t *testing.T) {
	h := newHarnessOn(t, rerunStore{memstore.New()}, testSecret)
	var rec eventtest.Recorder
	h.svc.events, h.svc.clients.events = rec.Sink(), rec.Sink()
	ctx := context.Background()
	ev := func(k event.Kind, o event.Outcome, humanID string) event.Event {
		return event.Event{Kind: k, Outcome: o, ClientID: "app", HumanID: humanID}
	}

	l := h.login(t, params("scope", "openid offline_access"), "alice")
	wantEvents(t, &rec, "login", ev(event.Login, event.Started, ""), ev(event.Login, event.Completed, l.humanID))
	tok := h.exchange(t, l, "")
	wantEvents(t, &rec, "exchange", ev(event.TokenIssued, event.AuthorizationCode, l.humanID))
	if _, err := h.svc.ExchangeCode(ctx, "app", l.code, appRedirect, ""); err == nil {
		t.Fatal("a reused code was exchanged")
	}
	wantEvents(t, &rec, "reused code", ev(event.CodeReused, event.Revoked, l.humanID))

	l2 := h.login(t, params("scope", "openid offline_access"), "alice")
	tok = h.exchange(t, l2, "")
	rec.Take()
	if _, err := h.svc.Refresh(ctx, "app", tok.RefreshToken, ""); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	wantEvents(t, &rec, "refresh", ev(event.TokenIssued, event.RefreshToken, l2.humanID))
	if _, err := h.svc.Refresh(ctx, "app", tok.RefreshToken, ""); err == nil {
		t.Fatal("a rotated refresh token was accepted")
	}
	wantEvents(t, &rec, "reused refresh token", ev(event.RefreshReused, event.Revoked, l2.humanID))

	// Declined, then expired, logins end with access_denied.
	ar := h.authorize(t, params())
	st, err := h.svc.Login(ctx, ar.ID, testBinding, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.palm.Deny(ctx, ar.ChallengeID, st.Challenge.Nonce); err != nil {
		t.Fatal(err)
	}
	if r, err := h.svc.Finish(ctx, ar.ID, testBinding); err != nil || r.Error != ErrAccessDenied {
		t.Fatalf("Finish of a declined login = %+v, %v", r, err)
	}
	wantEvents(t, &rec, "declined login", ev(event.Login, event.Started, ""), ev(event.Login, event.Denied, ""))
	ar = h.authorize(t, params())
	h.clock.Advance(loginTTL)
	if r, err := h.svc.Finish(ctx, ar.ID, testBinding); err != nil || r.Error != ErrAccessDenied {
		t.Fatalf("Finish of an expired login = %+v, %v", r, err)
	}
	if _, err := h.svc.Finish(ctx, ar.ID, testBinding); err == nil {
		t.Fatal("a login was answered twice")
	}
	wantEvents(t, &rec, "expired login", ev(event.Login, event.Started, ""), ev(event.Login, event.Expired, ""))

	if _, err := h.svc.EndSession(ctx, url.Values{"client_id": {"app"}}); err != nil {
		t.Fatalf("EndSession: %v", err)
	}
	wantEvents(t, &rec, "logout", ev(event.Logout, event.NoSession, ""))

	name := "Events App"
	ci, _, err := h.svc.Clients().Create(ctx, ClientSpec{Name: &name, RedirectURIs: []string{"https://events.example.test/cb"}, Owner: "dev-1"})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	renamed := "Events App 2"
	if _, err := h.svc.Clients().Update(ctx, ci.ID, "dev-1", ClientSpec{Name: &renamed}); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if _, _, err := h.svc.Clients().RotateSecret(ctx, ci.ID, "", 0); err != nil {
		t.Fatalf("RotateSecret: %v", err)
	}
	if err := h.svc.Clients().Delete(ctx, ci.ID, "other-owner"); err == nil {
		t.Fatal("another owner deleted the client")
	}
	if err := h.svc.Clients().Delete(ctx, ci.ID, ""); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	wantEvents(t, &rec, "client changes",
		event.Event{Kind: event.ClientCreated, ClientID: ci.ID, HumanID: "dev-1"},
		event.Event{Kind: event.ClientUpdated, ClientID: ci.ID, HumanID: "dev-1"},
		event.Event{Kind: event.ClientSecretRotated, ClientID: ci.ID},
		event.Event{Kind: event.ClientDeleted, ClientID: ci.ID})
}

// TestClientUpdateNoOp: an update that changes nothing (no field given, or each
// field given its current value) is a no-op: the client is answered as it is, its
// updated_at stays, and no "client updated" event is emitted (fourth review).
func TestClientUpdateNoOp(t *testing.T) {
	h := newHarnessOn(t, rerunStore{memstore.New()}, testSecret)
	var rec eventtest.Recorder
	h.svc.clients.events = rec.Sink()
	ctx := context.Background()
	name, uris := "No-op App", []string{"https://noop.example.test/cb"}
	ci, _, err := h.svc.Clients().Create(ctx, ClientSpec{Name: &name, RedirectURIs: uris})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	rec.Take()
	h.clock.Advance(time.Minute)
	sector, alg, aud := "", "", AudienceBaseURL
	for _, spec := range []ClientSpec{
		{},
		{Name: &name, RedirectURIs: uris, Sector: &sector, IDTokenAlg: &alg, AccessTokenAudience: &aud, PostLogoutRedirectURIs: []string{}, AllowedOrigins: []string{}},
	} {
		got, err := h.svc.Clients().Update(ctx, ci.ID, "", spec)
		if err != nil {
			t.Fatalf("Update(%+v): %v", spec, err)
		}
		if !got.UpdatedAt.Equal(ci.UpdatedAt) || got.Name != name {
			t.Errorf("Update(%+v): %+v, want the client unchanged (updated_at %s)", spec, got, ci.UpdatedAt)
		}
		wantEvents(t, &rec, "no-op update")
	}
	renamed := "No-op App 2"
	got, err := h.svc.Clients().Update(ctx, ci.ID, "", ClientSpec{Name: &renamed})
	if err != nil || got.Name != renamed || !got.UpdatedAt.After(ci.UpdatedAt) {
		t.Fatalf("Update(name) = %+v, %v; want the new name and a later updated_at", got, err)
	}
	wantEvents(t, &rec, "update", event.Event{Kind: event.ClientUpdated, ClientID: ci.ID})
}
