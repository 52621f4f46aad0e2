package palm

import (
	"context"
	"testing"

	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/event/eventtest"
)

// TestAssertionEvents: each assertion and denial posted for a challenge is one
// event.PalmAssertion, after its commit, with its outcome: verified (with the
// purpose and the human), refused (a bad signature), replayed (the challenge had
// ended), expired, denied. A wrong challenge id is no assertion's outcome.
func TestAssertionEvents(t *testing.T) {
	h := newPalmHarness(t, false)
	var rec eventtest.Recorder
	h.svc.events = rec.Sink()
	ctx := context.Background()

	c := h.challenge(t)
	good := h.assert(t, h.a, c, "alice")
	done, err := h.svc.Complete(ctx, c.ID, good)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	want := []event.Event{{Kind: event.PalmAssertion, Outcome: event.Verified, Purpose: string(PurposeLogin), HumanID: done.HumanID}}
	if _, err := h.svc.Complete(ctx, c.ID, good); err == nil {
		t.Fatal("a second Complete of the challenge succeeded")
	}
	want = append(want, event.Event{Kind: event.PalmAssertion, Outcome: event.Replayed})

	c2 := h.challenge(t)
	forged := h.assert(t, h.b, c2, "alice")
	forged = forged[:len(forged)-4] + "AAAA"
	if _, err := h.svc.Complete(ctx, c2.ID, forged); err == nil {
		t.Fatal("Complete with a bad signature succeeded")
	}
	want = append(want, event.Event{Kind: event.PalmAssertion, Outcome: event.Refused})

	if _, err := h.svc.Deny(ctx, c2.ID, c2.Nonce); err != nil {
		t.Fatalf("Deny: %v", err)
	}
	want = append(want, event.Event{Kind: event.PalmAssertion, Outcome: event.Denied, Purpose: string(PurposeLogin)})

	c3 := h.challenge(t)
	h.clock.Advance(testTTL + 1)
	late := h.assert(t, h.a, c3, "bob")
	if _, err := h.svc.Complete(ctx, c3.ID, late); err == nil {
		t.Fatal("Complete of an expired challenge succeeded")
	}
	want = append(want, event.Event{Kind: event.PalmAssertion, Outcome: event.Expired})

	if _, err := h.svc.Deny(ctx, "00000000-0000-4000-8000-000000000000", "nonce"); err == nil {
		t.Fatal("Deny of an unknown challenge succeeded")
	}
	got := rec.Take()
	if len(got) != len(want) {
		t.Fatalf("events = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestWithdraw: a decline on the page that asked (Withdraw) needs no scan nonce,
// so it works after the scan URL lapsed, ends the challenge denied once, and is
// no palm app's answer: no PalmAssertion event.
func TestWithdraw(t *testing.T) {
	h := newPalmHarness(t, false)
	var rec eventtest.Recorder
	h.svc.events = rec.Sink()
	ctx := context.Background()

	c := h.challenge(t)
	h.clock.Advance(ScanLifetime + scanCompletionGrace + 1) // the scan URL has lapsed
	if _, err := h.svc.Deny(ctx, c.ID, c.Nonce); err == nil {
		t.Fatal("Deny with a lapsed scan nonce succeeded")
	}
	rec.Take()
	done, err := h.svc.Withdraw(ctx, c.ID)
	if err != nil || done.Status != StatusDenied {
		t.Fatalf("Withdraw = %+v, %v; want denied", done, err)
	}
	if _, err := h.svc.Withdraw(ctx, c.ID); err == nil {
		t.Error("a second Withdraw succeeded")
	}
	if got := rec.Take(); len(got) != 0 {
		t.Errorf("Withdraw emitted %+v, want no palm assertion event", got)
	}
}
