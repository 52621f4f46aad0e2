package agent

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestPendingCapPerKey: sessions opened for a victim's deviceId under throwaway
// keys fill their own counts, not the real agent's: its init still succeeds.
func TestPendingCapPerKey(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for i := range MaxPendingSessions {
		thief := newTestAgent(t, "victim-agent", fmt.Sprintf("throwaway-%d", i))
		if _, err := h.reg.Init(ctx, thief.registration(t, h.clock.Now()), ""); err != nil {
			t.Fatalf("Init under throwaway key %d: %v", i, err)
		}
	}
	thief := newTestAgent(t, "victim-agent", "throwaway-0")
	for range MaxPendingSessions - 1 {
		h.clock.Advance(time.Millisecond)
		if _, err := h.reg.Init(ctx, thief.registration(t, h.clock.Now()), ""); err != nil {
			t.Fatalf("Init: %v", err)
		}
	}
	h.clock.Advance(time.Millisecond)
	_, err := h.reg.Init(ctx, thief.registration(t, h.clock.Now()), "")
	wantError(t, err, ErrTooManyPending, CodeTooManyPendingInits, "")

	real := newTestAgent(t, "victim-agent", "the real key")
	if _, err := h.reg.Init(ctx, real.registration(t, h.clock.Now()), ""); err != nil {
		t.Errorf("the real agent's Init after %d throwaway sessions: %v", 2*MaxPendingSessions-1, err)
	}

	// Sessions that expire leave the count: the first one opened under the full
	// key (at the start) makes room for one more, and only one.
	h.clock.Advance(testSessionTTL - time.Duration(MaxPendingSessions)*time.Millisecond)
	if _, err := h.reg.Init(ctx, thief.registration(t, h.clock.Now()), ""); err != nil {
		t.Errorf("Init once a pending session expired: %v", err)
	}
	// Signed a moment earlier: another message, still within the age window.
	_, err = h.reg.Init(ctx, thief.registration(t, h.clock.Now().Add(-time.Millisecond)), "")
	wantError(t, err, ErrTooManyPending, CodeTooManyPendingInits, "")
}

// TestPendingCapPerAddress: one client address may hold at most
// MaxPendingSessionsPerAddress open sessions, whatever the devices; another
// address is counted apart, and a session that ends frees its place.
func TestPendingCapPerAddress(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	const addr = "2001:db8:1:2::/64"
	var first *Session
	for i := range MaxPendingSessionsPerAddress {
		s, err := h.reg.Init(ctx, newTestAgent(t, fmt.Sprintf("fleet-%d", i), fmt.Sprintf("fleet-%d", i)).registration(t, h.clock.Now()), addr)
		if err != nil {
			t.Fatalf("Init #%d: %v", i+1, err)
		}
		if first == nil {
			first = s
		}
	}
	one := newTestAgent(t, "one-more", "one-more")
	_, err := h.reg.Init(ctx, one.registration(t, h.clock.Now()), addr)
	wantError(t, err, ErrTooManyPending, CodeTooManyPendingInits, "")
	if _, err := h.reg.Init(ctx, one.registration(t, h.clock.Now().Add(time.Millisecond)), "192.0.2.7"); err != nil {
		t.Errorf("Init from another address: %v", err)
	}
	h.deny(t, first)
	if _, err := h.reg.Init(ctx, one.registration(t, h.clock.Now().Add(2*time.Millisecond)), addr); err != nil {
		t.Errorf("Init after a session of the address ended: %v", err)
	}
}

// TestFingerprint pins the fingerprint's form: SHA-256 of the raw key, 8 bytes,
// hex in groups of four. examples/agent prints the same.
func TestFingerprint(t *testing.T) {
	a := newTestAgent(t, "d", "fingerprint") // examples/agent's TestFingerprint pins the same vector
	got := Fingerprint(a.pub)
	if got != "75b8-ec04-6a4e-201f" {
		t.Fatalf("Fingerprint = %q, want 75b8-ec04-6a4e-201f", got)
	}
	b := newTestAgent(t, "d", "another")
	if Fingerprint(b.pub) == got {
		t.Errorf("two keys share the fingerprint %q", got)
	}
	s := newHarness(t)
	sess, err := s.reg.Init(context.Background(), a.registration(t, s.clock.Now()), "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.reg.Challenge(context.Background(), sess, false)
	if err != nil || c.Request.KeyFingerprint != got || c.Request.DeviceID != "d" {
		t.Errorf("challenge request %+v (%v), want deviceId d and fingerprint %s", c.Request, err, got)
	}
}
