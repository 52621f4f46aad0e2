package oidc

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/palm"
)

// TestActorUntilRefusals: requested_actor_until is refused back to the client,
// invalid_request with its state, when it is unparsable, in the past, beyond the
// longest a grant lives, or without requested_actor; and when it passes while
// the person signs in, the scan records no grant.
func TestActorUntilRefusals(t *testing.T) {
	h := newActorHarness(t)
	now := h.clock.Now()
	for _, tc := range []struct {
		name, until, actor, says string
	}{
		{"unparsable", "next tuesday", "alice-bot", "RFC 3339"},
		{"a unix time", "1893456000", "alice-bot", "RFC 3339"},
		{"a date without a time", now.Add(48 * time.Hour).Format(time.DateOnly), "alice-bot", "RFC 3339"},
		{"too long", now.Add(time.Hour).Format(time.RFC3339) + strings.Repeat(" ", maxActorUntilLen), "alice-bot", "RFC 3339"},
		{"in the past", now.Add(-time.Minute).Format(time.RFC3339), "alice-bot", "in the past"},
		{"now", now.Format(time.RFC3339), "alice-bot", "in the past"},
		{"beyond the maximum", now.Add(refreshTTL + time.Second).Format(time.RFC3339), "alice-bot", "more than 90 days ahead"},
		{"without requested_actor", now.Add(time.Hour).Format(time.RFC3339), "", "needs requested_actor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.svc.Authorize(context.Background(), params(RequestedActorParam, tc.actor, RequestedActorUntilParam, tc.until), testBrowser)
			oe := wantError(t, err, ErrInvalidRequest)
			if oe.RedirectURI != appRedirect || oe.State != "st-123" || !strings.Contains(oe.Description, tc.says) {
				t.Fatalf("refusal = %+v; want invalid_request back to the client saying %q", oe, tc.says)
			}
		})
	}

	t.Run("passed during the sign-in", func(t *testing.T) {
		ar := h.authorize(t, params(RequestedActorParam, "alice-bot", RequestedActorUntilParam, h.clock.Now().Add(time.Minute).Format(time.RFC3339)))
		h.scan(t, ar, "alice")
		h.clock.Advance(time.Minute)
		r, err := h.svc.Finish(context.Background(), ar.ID, testBinding)
		if err != nil || r.Code != "" || r.Error != ErrInvalidRequest || r.Description != errActorUntilPassed || r.State != "st-123" {
			t.Fatalf("Finish = %+v, %v; want invalid_request %q back to the client", r, err, errActorUntilPassed)
		}
		if _, err := readActorGrant(context.Background(), h.store, "alice-bot", "app"); err == nil {
			t.Fatal("a grant was recorded")
		}
	})
}

// TestActorUntilEndsTheGrant: a grant asked until a date stores that end; the
// agent's tokens never outlive it (exp and expires_in bounded by it), and after
// it the jwt-bearer grant refuses with invalid_grant. The longest date accepted
// is the default lifetime.
func TestActorUntilEndsTheGrant(t *testing.T) {
	ctx := context.Background()
	h := newActorHarness(t)
	until := h.clock.Now().Add(accessTTL / 2).UTC()
	if r := h.consent(t, "alice", "alice-bot", RequestedActorUntilParam, until.Format(time.RFC3339)); r.Code == "" {
		t.Fatalf("consent = %+v; want a code", r)
	}
	g, err := readActorGrant(ctx, h.store, "alice-bot", "app")
	if err != nil || !g.ExpiresAt.Equal(until) {
		t.Fatalf("grant = %+v, %v; want it to end at %v", g, err, until)
	}
	if mine, _ := h.svc.HumanActorGrants(ctx, h.alice); len(mine) != 1 || !mine[0].ExpiresAt.Equal(until) {
		t.Fatalf("alice's grants = %+v; want one ending at %v", mine, until)
	}

	// An access token issued now would live accessTTL: it ends with the grant.
	resp, err := h.agentToken(h.assertion(t, "alice-bot", h.aliceBotKey, nil))
	if err != nil {
		t.Fatalf("agent token: %v", err)
	}
	var claims AccessClaims
	h.parseToken(t, resp.AccessToken, "ES256", &claims)
	if !claims.ExpiresAt.Time.Equal(until) || resp.ExpiresIn != int64(until.Sub(h.clock.Now())/time.Second) {
		t.Fatalf("token exp %v, expires_in %d; want the grant's end %v", claims.ExpiresAt, resp.ExpiresIn, until)
	}

	h.clock.Set(until.Add(-time.Second))
	if _, err := h.agentToken(h.assertion(t, "alice-bot", h.aliceBotKey, nil)); err != nil {
		t.Fatalf("agent token a second before the end: %v", err)
	}
	h.clock.Set(until)
	_, err = h.agentToken(h.assertion(t, "alice-bot", h.aliceBotKey, nil))
	if oe := wantError(t, err, ErrInvalidGrant); !strings.Contains(oe.Description, "has ended") {
		t.Fatalf("agent token at the grant's end: %+v; want invalid_grant saying it has ended", oe)
	}
	if mine, _ := h.svc.HumanActorGrants(ctx, h.alice); len(mine) != 0 {
		t.Fatalf("alice's grants after the end = %+v; want none", mine)
	}

	// The maximum is the default lifetime: a date exactly that far is accepted.
	h2 := newActorHarness(t)
	longest := h2.clock.Now().Add(refreshTTL).UTC()
	h2.consent(t, "alice", "alice-bot", RequestedActorUntilParam, longest.Format(time.RFC3339))
	if g, err := readActorGrant(ctx, h2.store, "alice-bot", "app"); err != nil || !g.ExpiresAt.Equal(longest) {
		t.Fatalf("grant = %+v, %v; want it to end at %v", g, err, longest)
	}
}

// TestActorUntilInThePalmApp: the palm app's challenge names the end of the grant
// it asks for, as the login page does: the requested date, else the longest a
// grant lives; a plain login names none.
func TestActorUntilInThePalmApp(t *testing.T) {
	ctx := context.Background()
	h := newActorHarness(t)
	until := h.clock.Now().Add(time.Hour).UTC().Truncate(time.Second)
	for _, tc := range []struct {
		name string
		p    []string
		want time.Time
	}{
		{"until a date", []string{RequestedActorParam, "alice-bot", RequestedActorUntilParam, until.Format(time.RFC3339)}, until},
		{"the longest", []string{RequestedActorParam, "alice-bot"}, h.clock.Now().Add(refreshTTL).UTC()},
		{"a plain login", nil, time.Time{}},
	} {
		ar := h.authorize(t, params(tc.p...))
		c, err := palm.ReadChallenge(ctx, h.store, ar.ChallengeID)
		if err != nil {
			t.Fatalf("%s: challenge: %v", tc.name, err)
		}
		if got := time.Time(c.Request.ActorUntil); !got.Equal(tc.want) {
			t.Errorf("%s: the palm app is told the grant ends %v; want %v", tc.name, got, tc.want)
		}
	}
}
