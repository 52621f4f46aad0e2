package agent

import (
	"context"
	"errors"
	"testing"

	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/storage"
)

// TestEndHumanOwnerSessions: the operator ends every verified agents-page session
// of one person (found by their index, written when the palm verified the
// session); another person's session lives on; a second end finds nothing.
func TestEndHumanOwnerSessions(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	alice := h.register(t, newTestAgent(t, "mine", "mine"), "alice")
	h.register(t, newTestAgent(t, "theirs", "theirs"), "bob")
	open := func(who string) string {
		t.Helper()
		secret, _, c, err := h.reg.StartOwnerSession(ctx, palm.Request{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.palm.DevScan(ctx, c.ID, c.Nonce, who); err != nil {
			t.Fatal(err)
		}
		return secret
	}
	a1, a2, b := open("alice"), open("alice"), open("bob")
	end := func() int {
		t.Helper()
		var n int
		if err := h.store.Update(ctx, func(txn storage.Txn) (err error) {
			n, err = h.reg.EndHumanOwnerSessions(txn, alice)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := end(); n != 2 {
		t.Fatalf("EndHumanOwnerSessions(alice) = %d, want her 2 sessions", n)
	}
	for _, s := range []string{a1, a2} {
		if _, err := h.reg.OwnerSession(ctx, s); !errors.Is(err, ErrOwnerSessionNotFound) {
			t.Errorf("alice's ended session = %v, want not found", err)
		}
	}
	if got, err := h.reg.OwnerSession(ctx, b); err != nil || got.Status != OwnerVerified {
		t.Errorf("bob's session = %+v, %v; want it verified still", got, err)
	}
	if n := end(); n != 0 {
		t.Errorf("a second end = %d, want 0", n)
	}
}
