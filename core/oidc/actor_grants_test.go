package oidc

import (
	"context"
	"errors"
	"testing"
)

func TestActorGrantRevoked(t *testing.T) {
	ctx := context.Background()
	h := newActorHarness(t)
	h.consent(t, "alice", "alice-bot")
	h.consent(t, "bob", "bob-bot")
	resp, err := h.agentToken(h.assertion(t, "alice-bot", h.aliceBotKey, nil))
	if err != nil {
		t.Fatalf("agent token: %v", err)
	}
	// Each human sees only their own agents' grants, and cannot revoke others'.
	mine, err := h.svc.HumanActorGrants(ctx, h.alice)
	if err != nil || len(mine) != 1 || mine[0].DeviceID != "alice-bot" || mine[0].ClientID != "app" || mine[0].LastUsedAt.IsZero() {
		t.Fatalf("alice's grants = %+v, %v; want alice-bot's for app, used", mine, err)
	}
	if err := h.svc.RevokeActorGrant(ctx, h.bob, "alice-bot", "app"); !errors.Is(err, ErrActorGrantNotFound) {
		t.Fatalf("bob revoking alice's grant: %v; want not found", err)
	}
	if err := h.svc.RevokeActorGrant(ctx, h.alice, "alice-bot", "app"); err != nil {
		t.Fatalf("RevokeActorGrant: %v", err)
	}
	// No new token, and the live one is refused at once.
	_, err = h.agentToken(h.assertion(t, "alice-bot", h.aliceBotKey, nil))
	if oe, ok := asOAuthErr(err); !ok || oe.Code != ErrInvalidGrant {
		t.Fatalf("agent token after revocation = %v; want invalid_grant", err)
	}
	if _, err := h.svc.VerifyAccessToken(ctx, resp.AccessToken); err == nil {
		t.Fatal("the revoked grant's live token is still admitted")
	}
	if mine, _ := h.svc.HumanActorGrants(ctx, h.alice); len(mine) != 0 {
		t.Fatalf("alice's grants after revocation = %+v", mine)
	}
	if theirs, _ := h.svc.HumanActorGrants(ctx, h.bob); len(theirs) != 1 || theirs[0].DeviceID != "bob-bot" {
		t.Fatalf("bob's grants = %+v; want bob-bot's untouched", theirs)
	}
	if err := h.svc.RevokeActorGrant(ctx, h.alice, "alice-bot", "app"); !errors.Is(err, ErrActorGrantNotFound) {
		t.Fatalf("revoking twice: %v; want not found", err)
	}
}

func TestActorGrantsRevokedWithTheAgent(t *testing.T) {
	ctx := context.Background()
	h := newActorHarness(t)
	h.consent(t, "alice", "alice-bot")
	resp, err := h.agentToken(h.assertion(t, "alice-bot", h.aliceBotKey, nil))
	if err != nil {
		t.Fatalf("agent token: %v", err)
	}
	h.agents.remove("alice-bot")
	if err := h.svc.RevokeAgentGrants(ctx, h.alice, "alice-bot"); err != nil {
		t.Fatalf("RevokeAgentGrants: %v", err)
	}
	if _, err := h.svc.VerifyAccessToken(ctx, resp.AccessToken); err == nil {
		t.Fatal("a removed agent's live token is still admitted")
	}
	if err := h.svc.RevokeAgentGrants(ctx, h.alice, "alice-bot"); err != nil {
		t.Fatalf("RevokeAgentGrants with nothing left: %v", err)
	}
}

// TestActorGrantReplacedEndsItsTokens: a new consent for the same agent and client
// replaces the grant, and the replaced grant's live token is refused at once on
// this instance (not only once the revocation set is re-read).
func TestActorGrantReplacedEndsItsTokens(t *testing.T) {
	ctx := context.Background()
	h := newActorHarness(t)
	h.consent(t, "alice", "alice-bot")
	old, err := h.agentToken(h.assertion(t, "alice-bot", h.aliceBotKey, nil))
	if err != nil {
		t.Fatalf("agent token: %v", err)
	}
	h.consent(t, "alice", "alice-bot")
	if _, err := h.svc.VerifyAccessToken(ctx, old.AccessToken); err == nil {
		t.Fatal("the replaced grant's live token is still admitted")
	}
	fresh, err := h.agentToken(h.assertion(t, "alice-bot", h.aliceBotKey, nil))
	if err != nil {
		t.Fatalf("agent token under the new grant: %v", err)
	}
	if _, err := h.svc.VerifyAccessToken(ctx, fresh.AccessToken); err != nil {
		t.Fatalf("the new grant's token: %v", err)
	}
}
