package oidc

import (
	"context"
	"testing"
)

// TestVerifiedLoginFinishedLate (fourth review): a login whose palm scan was
// verified could be finished by its browser for as long as its records were kept
// (a day): a tab left open, or its login cookie replayed, collected a code and a
// new SSO session hours after the scan. A verified login is finished within
// VerifiedLoginWindow of its scan, or answered access_denied.
func TestVerifiedLoginFinishedLate(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()

	ar := h.authorize(t, params())
	h.scan(t, ar, "alice")
	h.clock.Advance(VerifiedLoginWindow - 1)
	if r, err := h.svc.Finish(ctx, ar.ID, testBinding); err != nil || r == nil || r.Code == "" {
		t.Fatalf("Finish just within the window = %+v, %v; want a code", r, err)
	}

	ar = h.authorize(t, params())
	h.scan(t, ar, "alice")
	h.clock.Advance(VerifiedLoginWindow + 1)
	r, err := h.svc.Finish(ctx, ar.ID, testBinding)
	if err != nil || r == nil || r.Code != "" || r.Error != ErrAccessDenied || r.URI != appRedirect || r.State != "st-123" {
		t.Fatalf("Finish after the window = %+v, %v; want access_denied to the client, no code", r, err)
	}
	if _, err := h.svc.Finish(ctx, ar.ID, testBinding); err == nil {
		t.Fatal("the late login was answered twice")
	}
}
