package agent

import (
	"context"
	"errors"
	"testing"
)

// TestRemoveCallsTheHook: both removals (the operator's Remove, the owner's
// RemoveOwned) call the OnRemoved hook once, after the commit, with what they
// removed; a refused removal calls nothing; and a failing hook leaves the
// removal standing: Remove returns it with an error wrapping ErrAfterRemoval.
func TestRemoveCallsTheHook(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	byOperator, byOwner, failing := newTestAgent(t, "hook-1", "hook-1"), newTestAgent(t, "hook-2", "hook-2"), newTestAgent(t, "hook-3", "hook-3")
	alice := h.register(t, byOperator, "alice")
	h.register(t, byOwner, "alice")
	h.register(t, failing, "alice")
	var calls []Removed
	var fail error
	h.reg.OnRemoved(func(ctx context.Context, r Removed) error {
		// After the commit: the agent is gone when the hook runs.
		if l := h.lookupDevice(t, r.DeviceID); l.Registered {
			t.Errorf("the hook ran before %s's removal committed", r.DeviceID)
		}
		if ctx.Err() != nil {
			t.Errorf("the hook's context is done: %v", ctx.Err())
		}
		calls = append(calls, r)
		return fail
	})

	if _, err := h.reg.Remove(ctx, "nobody"); !errors.Is(err, ErrAgentNotFound) {
		t.Fatalf("Remove(unknown) = %v", err)
	}
	if _, err := h.reg.RemoveOwned(ctx, "someone-else", "hook-2"); !errors.Is(err, ErrAgentNotFound) {
		t.Fatalf("RemoveOwned(another's) = %v", err)
	}
	if len(calls) != 0 {
		t.Fatalf("refused removals called the hook: %+v", calls)
	}
	if _, err := h.reg.Remove(ctx, "hook-1"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, err := h.reg.RemoveOwned(ctx, alice, "hook-2"); err != nil {
		t.Fatalf("RemoveOwned: %v", err)
	}
	if len(calls) != 2 || calls[0].DeviceID != "hook-1" || calls[1].DeviceID != "hook-2" ||
		calls[0].HumanID != alice || calls[1].HumanID != alice || calls[0].KeyFingerprint == "" {
		t.Fatalf("hook calls = %+v; want hook-1 then hook-2, alice's", calls)
	}

	fail = errors.New("store unavailable")
	removed, err := h.reg.Remove(ctx, "hook-3")
	if removed == nil || removed.DeviceID != "hook-3" || !errors.Is(err, ErrAfterRemoval) || !errors.Is(err, fail) {
		t.Fatalf("Remove with a failing hook = %+v, %v; want the removal and ErrAfterRemoval", removed, err)
	}
	if l := h.lookupDevice(t, "hook-3"); l.Registered {
		t.Fatal("a failing hook undid the removal")
	}
}
