package oidc

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/memstore"
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

// TestRevokeAgentTokenTransaction: the revocation's transaction may run twice
// (it carries nothing from a first run), and one that does not commit leaves the
// grant and this instance's revocation set as they were.
func TestRevokeAgentTokenTransaction(t *testing.T) {
	ctx := context.Background()
	t.Run("run twice", func(t *testing.T) {
		h := newActorHarnessOn(t, rerunStore{memstore.New()})
		h.consent(t, "alice", "alice-bot", "scope", "openid orders:read")
		resp, err := h.agentToken(h.assertion(t, "alice-bot", h.aliceBotKey, nil))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.svc.Revoke(ctx, "app", resp.AccessToken); err != nil {
			t.Fatalf("Revoke on a store that reruns transactions: %v", err)
		}
		if _, err := h.svc.VerifyAccessToken(ctx, resp.AccessToken); err == nil {
			t.Fatal("the revoked token still verifies")
		}
		_, err = h.agentToken(h.assertion(t, "alice-bot", h.aliceBotKey, nil))
		wantError(t, err, ErrInvalidGrant)
	})
	t.Run("lost commit", func(t *testing.T) {
		var fail atomic.Bool
		h := newActorHarnessOn(t, lostCommitStore{memstore.New(), &fail})
		h.consent(t, "alice", "alice-bot", "scope", "openid orders:read")
		resp, err := h.agentToken(h.assertion(t, "alice-bot", h.aliceBotKey, nil))
		if err != nil {
			t.Fatal(err)
		}
		fail.Store(true)
		err = h.svc.Revoke(ctx, "app", resp.AccessToken)
		fail.Store(false)
		if !errors.Is(err, storage.ErrUnavailable) {
			t.Fatalf("Revoke with a lost commit: %v, want unavailable", err)
		}
		if _, err := h.svc.VerifyAccessToken(ctx, resp.AccessToken); err != nil {
			t.Fatalf("the token after a revocation that did not commit: %v", err)
		}
		if _, err := h.agentToken(h.assertion(t, "alice-bot", h.aliceBotKey, nil)); err != nil {
			t.Fatalf("the grant after a revocation that did not commit: %v", err)
		}
	})
}
