package oidc

import (
	"context"
	"errors"
	"testing"

	"github.com/palmgate/palmgate/storage"
)

// TestClientDeletionEndsItsAgentGrantsAndConsents: deleting a dynamic client
// revokes every agent grant for it (its live agent token is refused at once,
// no new token is issued) and forgets the people's consents to it, so that a
// client back under the same id (a restored backup) finds neither; another
// client's grant and consent are untouched.
func TestClientDeletionEndsItsAgentGrantsAndConsents(t *testing.T) {
	ctx := context.Background()
	h := newSSOHarness(t, ssoTTL)
	ah := &actorHarness{harness: h, agents: &fakeAgents{agents: map[string]fakeAgent{}}}
	h.svc.agents = ah.agents
	ah.alice = h.login(t, params(), "alice").humanID
	key := ah.agents.register(t, "alice-bot", ah.alice)
	gone, goneSecret := h.createClient(t, "dev-1", appRedirect)
	kept, keptSecret := h.createClient(t, "dev-1", appRedirect)
	tokens := map[string]string{}
	for id, secret := range map[string]string{gone.ID: goneSecret, kept.ID: keptSecret} {
		if r := ah.consent(t, "alice", "alice-bot", "client_id", id); r.Code == "" {
			t.Fatalf("consent for %s = %+v; want a code", id, r)
		}
		resp, err := ah.agentToken(ah.assertion(t, "alice-bot", key, nil), "client_id", id, "client_secret", secret)
		if err != nil {
			t.Fatalf("agent token for %s: %v", id, err)
		}
		tokens[id] = resp.AccessToken
	}
	consent := func(clientID string) []string {
		t.Helper()
		var scopes []string
		if err := h.store.View(ctx, func(txn storage.Txn) error {
			var err error
			scopes, err = h.svc.getConsent(txn, ah.alice, clientID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return scopes
	}
	if consent(gone.ID) == nil || consent(kept.ID) == nil {
		t.Fatal("the logins remembered no consent")
	}
	var rec *clientRecord
	if err := h.store.View(ctx, func(txn storage.Txn) error {
		var err error
		rec, err = readClient(txn, gone.ID)
		return err
	}); err != nil {
		t.Fatal(err)
	}

	if err := h.svc.Clients().Delete(ctx, gone.ID, "dev-1"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := h.svc.VerifyAccessToken(ctx, tokens[gone.ID]); err == nil {
		t.Fatal("the deleted client's live agent token is still admitted")
	}
	if _, err := h.svc.VerifyAccessToken(ctx, tokens[kept.ID]); err != nil {
		t.Fatalf("the kept client's agent token is refused: %v", err)
	}
	_, err := ah.agentToken(ah.assertion(t, "alice-bot", key, nil), "client_id", gone.ID, "client_secret", goneSecret)
	wantError(t, err, ErrInvalidClient)
	if _, err := readActorGrant(ctx, h.store, "alice-bot", gone.ID); err == nil {
		t.Fatal("the deleted client's agent grant is still stored")
	}
	if mine, _ := h.svc.HumanActorGrants(ctx, ah.alice); len(mine) != 1 || mine[0].ClientID != kept.ID {
		t.Fatalf("alice's grants = %+v; want the kept client's alone", mine)
	}
	if consent(gone.ID) != nil || consent(kept.ID) == nil {
		t.Fatalf("consents after the deletion: deleted client %v, kept client %v; want none and some", consent(gone.ID), consent(kept.ID))
	}

	// The client comes back under the same id: it starts with no consent, and
	// the agent gets no token for it.
	if err := h.store.Update(ctx, func(txn storage.Txn) error { return h.svc.clients.writeClient(txn, rec, 0) }); err != nil {
		t.Fatal(err)
	}
	if consent(gone.ID) != nil {
		t.Fatal("the re-created client starts with the old consent")
	}
	_, err = ah.agentToken(ah.assertion(t, "alice-bot", key, nil), "client_id", gone.ID, "client_secret", goneSecret)
	wantError(t, err, ErrInvalidGrant)
}

// TestClientDeletionStandsWhenItsCleanUpFails: when ending the deleted client's
// grants and consents fails, the deletion stands (the client authenticates no
// more) and Delete says so with ErrAfterClientDeletion, for its callers to report
// the deletion as done and log the rest.
func TestClientDeletionStandsWhenItsCleanUpFails(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	ci, secret := h.createClient(t, "dev-1", appRedirect)
	h.svc.clients.deleted = func(context.Context, string) error { return errors.New("the store went away") }
	err := h.svc.Clients().Delete(ctx, ci.ID, "dev-1")
	if !errors.Is(err, ErrAfterClientDeletion) {
		t.Fatalf("Delete = %v; want ErrAfterClientDeletion", err)
	}
	if err := h.auth(ci.ID, secret); err == nil {
		t.Fatal("the deleted client still authenticates")
	}
	if err := h.svc.Clients().Delete(ctx, ci.ID, "dev-1"); errors.Is(err, ErrAfterClientDeletion) || err == nil {
		t.Fatalf("deleting it again = %v; want not found", err)
	}
}
