package agent

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/storage/memstore"
)

// TestRefusedInitHoldsNoPendingPlace: an init that is refused (a replayed
// message, an agent already registered, too many sessions for its key or its
// address) creates no session and no challenge, so it takes no place under the
// caps of pending registrations (max_pending_registrations and its per_network):
// one address replaying a single signed message, or agents re-running init
// against 409, must not shut registrations off for their network (or
// everyone) for the challenges' lifetime.
func TestRefusedInitHoldsNoPendingPlace(t *testing.T) {
	const limit, addr = 4, "192.0.2.7"
	store := memstore.New()
	t.Cleanup(func() { _ = store.Close() })
	clock := newFakeClock()
	p, err := palm.NewService(palm.Config{Store: store, Now: clock.Now, Issuer: testIssuer, Dev: true,
		MaxPending:           map[palm.Purpose]int{palm.PurposeAgentRegistration: limit * 2},
		MaxPendingPerNetwork: map[palm.Purpose]int{palm.PurposeAgentRegistration: limit}})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{clock: clock, store: store, palm: p, reg: NewService(Config{
		Store: store, Palm: p, Now: clock.Now, Issuer: testIssuer, SessionTTL: testSessionTTL, ChallengeMaxAge: testMaxAge,
	})}
	ctx := context.Background()

	// One place taken by a real session, one by a registration that completed.
	replayed := newTestAgent(t, "replayer", "replayer").registration(t, clock.Now())
	if _, err := h.reg.Init(ctx, replayed, addr); err != nil {
		t.Fatal(err)
	}
	registered := newTestAgent(t, "registered", "registered")
	s, err := h.reg.Init(ctx, registered.registration(t, clock.Now()), addr)
	if err != nil {
		t.Fatal(err)
	}
	h.scan(t, s, "alice")

	// Many refusals from the same address.
	for i := range 3 * limit {
		clock.Advance(1)
		var err error
		if i%2 == 0 {
			_, err = h.reg.Init(ctx, replayed, addr)
		} else {
			_, err = h.reg.Init(ctx, registered.registration(t, clock.Now()), addr)
		}
		if err == nil || errors.Is(err, ErrTooManyPending) || !(errors.Is(err, ErrInvalid) || errors.Is(err, ErrAlreadyRegistered)) {
			t.Fatalf("refused init #%d: %v, want challenge_replayed or already_registered", i, err)
		}
	}
	// The network's other places are still free.
	for i := range limit - 2 {
		a := newTestAgent(t, fmt.Sprintf("after-%d", i), fmt.Sprintf("after-%d", i))
		if _, err := h.reg.Init(ctx, a.registration(t, clock.Now()), addr); err != nil {
			t.Fatalf("init #%d after the refusals: %v (refused inits took the network's places)", i+1, err)
		}
	}
	// And the cap still holds.
	a := newTestAgent(t, "one-too-many", "one-too-many")
	if _, err := h.reg.Init(ctx, a.registration(t, clock.Now()), addr); err == nil {
		t.Error("an init past the network's cap was admitted")
	}
}
