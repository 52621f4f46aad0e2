package oidc

import (
	"context"
	"testing"
)

// Review 3, finding 1: an agent's access token revoked by its client (RFC 7009)
// ends the agent's grant for that client, as revoking a login's token revokes its
// grant; the token endpoint no longer answers tokens that are dead on arrival.
func TestRevokedAgentTokenLeavesNoDeadTokens(t *testing.T) {
	h := newActorHarness(t)
	h.consent(t, "alice", "alice-bot", "scope", "openid orders:read")
	resp, err := h.agentToken(h.assertion(t, "alice-bot", h.aliceBotKey, nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.svc.Revoke(context.Background(), "app", resp.AccessToken); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	if _, err := h.svc.VerifyAccessToken(context.Background(), resp.AccessToken); err == nil {
		t.Fatal("the revoked token still verifies")
	}
	// The token endpoint used to go on answering 200 with tokens the revocation set
	// refused at once (same sid) until access_token_ttl had passed.
	next, err := h.agentToken(h.assertion(t, "alice-bot", h.aliceBotKey, nil))
	if err == nil {
		_, verr := h.svc.VerifyAccessToken(context.Background(), next.AccessToken)
		t.Fatalf("after revocation the token endpoint answered a token (verifies: %v); want invalid_grant", verr)
	}
	wantError(t, err, ErrInvalidGrant)
	if grants, err := h.svc.HumanActorGrants(context.Background(), h.alice); err != nil || len(grants) != 0 {
		t.Fatalf("alice's agent grants = %+v, %v; want none", grants, err)
	}
}

// Revoking a token of a grant that was replaced since leaves the new grant alone.
func TestRevokingAReplacedAgentTokenKeepsTheNewGrant(t *testing.T) {
	h := newActorHarness(t)
	h.consent(t, "alice", "alice-bot", "scope", "openid orders:read")
	old, err := h.agentToken(h.assertion(t, "alice-bot", h.aliceBotKey, nil))
	if err != nil {
		t.Fatal(err)
	}
	h.consent(t, "alice", "alice-bot", "scope", "openid orders:read")
	if err := h.svc.Revoke(context.Background(), "app", old.AccessToken); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	next, err := h.agentToken(h.assertion(t, "alice-bot", h.aliceBotKey, nil))
	if err != nil {
		t.Fatalf("token under the new grant: %v", err)
	}
	if _, err := h.svc.VerifyAccessToken(context.Background(), next.AccessToken); err != nil {
		t.Fatalf("token under the new grant refused: %v", err)
	}
}
