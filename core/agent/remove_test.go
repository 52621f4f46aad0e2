package agent

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/memstore"
	"github.com/palmgate/palmgate/storage/storagetest"
)

// signs returns the signature check of a message a signed, as an agent asks it.
func (h *harness) signs(t *testing.T, a *testAgent) *SignatureCheck {
	t.Helper()
	ts := h.clock.Now().UnixMilli()
	c, err := ParseChallenge(mustJSON(t, a.fields(fmt.Sprintf("hello-%d", ts), ts)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := h.reg.VerifySignature(context.Background(), c)
	if err != nil {
		t.Fatalf("VerifySignature(%s): %v", a.deviceID, err)
	}
	return got
}

func (h *harness) board(t *testing.T) []LeaderboardEntry {
	t.Helper()
	b, err := h.reg.Leaderboard(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// seen asks every cached answer about a, so that the caches hold it.
func (h *harness) seen(t *testing.T, a *testAgent, registered bool) {
	t.Helper()
	if l := h.lookupDevice(t, a.deviceID); l.Registered != registered {
		t.Fatalf("%s by device: registered %v, want %v", a.deviceID, l.Registered, registered)
	}
	if l := h.lookupKey(t, a); l.Registered != registered {
		t.Fatalf("%s by key: registered %v, want %v", a.deviceID, l.Registered, registered)
	}
	if c := h.signs(t, a); !c.Verified || c.Registered != registered {
		t.Fatalf("%s signature check: %+v, want verified, registered %v", a.deviceID, c, registered)
	}
}

// TestRemove: a removal takes the agent out of the lookups, the signature checks
// (though they were cached) and the leaderboard: the count drops, the first
// registration is recomputed, and the human leaves it with their last agent.
func TestRemove(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	agents := []*testAgent{newTestAgent(t, "rm-1", "rm-1"), newTestAgent(t, "rm-2", "rm-2"), newTestAgent(t, "rm-3", "rm-3")}
	var times []time.Time
	var alice string
	for _, a := range agents {
		h.clock.Advance(time.Second)
		times = append(times, h.clock.Now())
		alice = h.register(t, a, "alice")
	}
	bobAgent := newTestAgent(t, "rm-bob", "rm-bob")
	bob := h.register(t, bobAgent, "bob")
	for _, a := range agents {
		h.seen(t, a, true)
	}
	if b := h.board(t); len(b) != 2 || b[0].HumanID != alice || b[0].AgentCount != 3 {
		t.Fatalf("leaderboard before: %+v", b)
	}

	removed, err := h.reg.Remove(ctx, "rm-1")
	if err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if removed.HumanID != alice || !sameTime(removed.RegisteredAt, times[0]) {
		t.Errorf("Remove answered %+v", removed)
	}
	h.seen(t, agents[0], false) // at once on this instance, with no time passing
	if l := h.lookupDevice(t, "rm-1"); l.HumanID != "" || !time.Time(l.RegisteredAt).IsZero() {
		t.Errorf("a removed agent's lookup: %+v, want the unknown agent's", l)
	}
	h.seen(t, agents[1], true)
	b := h.board(t)
	if len(b) != 2 || b[0].HumanID != alice || b[0].AgentCount != 2 || !sameTime(b[0].EarliestRegisteredAt, times[1]) {
		t.Fatalf("leaderboard after one removal: %+v, want alice with 2 from %s", b, times[1])
	}
	owned, err := h.reg.HumanAgents(ctx, alice)
	if err != nil || len(owned) != 2 || owned[0].DeviceID != "rm-2" || owned[1].DeviceID != "rm-3" ||
		!sameTime(owned[0].RegisteredAt, times[1]) || owned[0].KeyFingerprint != Fingerprint(agents[1].pub) {
		t.Fatalf("HumanAgents(alice) = %+v, %v", owned, err)
	}

	// The last one registered, then the rest: alice leaves the leaderboard.
	for _, id := range []string{"rm-3", "rm-2"} {
		if _, err := h.reg.Remove(ctx, id); err != nil {
			t.Fatalf("Remove(%s): %v", id, err)
		}
	}
	if b := h.board(t); len(b) != 1 || b[0].HumanID != bob || b[0].AgentCount != 1 {
		t.Fatalf("leaderboard after alice's last removal: %+v, want bob alone", b)
	}
	if owned, err := h.reg.HumanAgents(ctx, alice); err != nil || len(owned) != 0 {
		t.Fatalf("HumanAgents(alice) = %+v, %v; want none", owned, err)
	}
	if err := h.store.View(ctx, func(txn storage.Txn) error {
		_, err := txn.Get(humanKey(alice))
		return err
	}); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("alice's stats outlived her agents: %v", err)
	}
	h.seen(t, bobAgent, true)
}

// TestRemoveRefused: an unknown deviceId is a not-found fault, a malformed one is
// invalid, and a human cannot remove an agent that is not theirs (it looks
// unknown to them, and stays registered).
func TestRemoveRefused(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	a := newTestAgent(t, "owned", "owned")
	alice := h.register(t, a, "alice")
	bob := h.human(t, "bob")

	if _, err := h.reg.Remove(ctx, "nobody"); !errors.Is(err, ErrAgentNotFound) {
		t.Errorf("Remove(unknown) = %v, want ErrAgentNotFound", err)
	}
	if _, err := h.reg.Remove(ctx, "bad\x00id"); !errors.Is(err, ErrInvalid) {
		t.Errorf("Remove(malformed) = %v, want ErrInvalid", err)
	}
	if _, err := h.reg.RemoveOwned(ctx, bob, "owned"); !errors.Is(err, ErrAgentNotFound) {
		t.Errorf("RemoveOwned(bob, alice's) = %v, want ErrAgentNotFound", err)
	}
	if _, err := h.reg.RemoveOwned(ctx, "", "owned"); !errors.Is(err, ErrAgentNotFound) {
		t.Errorf("RemoveOwned(no human) = %v, want ErrAgentNotFound", err)
	}
	h.seen(t, a, true)
	if _, err := h.reg.RemoveOwned(ctx, alice, "owned"); err != nil {
		t.Fatalf("RemoveOwned(alice, hers) = %v", err)
	}
	h.seen(t, a, false)
	if _, err := h.reg.Remove(ctx, "owned"); !errors.Is(err, ErrAgentNotFound) {
		t.Errorf("a second removal = %v, want ErrAgentNotFound", err)
	}
}

// TestRegisterAgainAfterRemoval: the deviceId and the key are free again after a
// removal, through a new signed message; the used one stays refused as a replay.
func TestRegisterAgainAfterRemoval(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	a := newTestAgent(t, "again", "again")
	used := a.registration(t, h.clock.Now()) // the message h.register signs now
	h.register(t, a, "alice")
	if _, err := h.reg.Remove(ctx, "again"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.reg.Init(ctx, used, ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("the used message after a removal = %v, want refused as a replay", err)
	}
	h.clock.Advance(time.Second)
	bob := h.register(t, a, "bob") // same deviceId, same key, a new message
	if l := h.lookupDevice(t, "again"); !l.Registered || l.HumanID != bob {
		t.Fatalf("re-registered agent: %+v, want bob's", l)
	}
	h.seen(t, a, true)
}

// TestRemovalSeenByAnotherInstance: an instance whose caches hold an agent that
// another instance removed answers registered:false once its last read of the
// removal generation is RemovalMaxAge old, without waiting for the background
// read; and with the store unreadable past that bound it fails rather than
// answer from the old cache.
func TestRemovalSeenByAnotherInstance(t *testing.T) {
	store := memstore.New()
	h := newHarnessOn(t, store)
	flaky := &storagetest.DownStore{Store: store}
	other := newHarnessOn(t, flaky) // the other instance: its own caches and clock
	ctx := context.Background()
	a := newTestAgent(t, "shared", "shared")
	kept := newTestAgent(t, "kept", "kept")
	h.register(t, a, "alice")
	h.register(t, kept, "alice")
	other.seen(t, a, true)
	other.seen(t, kept, true)

	if _, err := h.reg.Remove(ctx, "shared"); err != nil {
		t.Fatal(err)
	}
	reads := flaky.Views.Load()
	other.seen(t, kept, true) // within removalRefresh: from the caches, no read
	if n := flaky.Views.Load(); n != reads {
		t.Errorf("a known key cost %d store reads within removalRefresh, want none", n-reads)
	}
	other.clock.Advance(RemovalMaxAge)
	other.seen(t, a, false)
	other.seen(t, kept, true)

	// Past the bound with the store down: no answer from the cache.
	other.clock.Advance(RemovalMaxAge)
	flaky.Down.Store(true)
	if _, err := other.reg.LookupDevice(ctx, "kept"); !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("LookupDevice past the bound, store down = %v, want ErrUnavailable", err)
	}
	c := kept.registration(t, other.clock.Now())
	if _, err := other.reg.VerifySignature(ctx, c); !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("VerifySignature past the bound, store down = %v, want ErrUnavailable", err)
	}
	flaky.Down.Store(false)
	other.clock.Advance(removalRetry)
	other.seen(t, kept, true)
}

// TestRemovalNotRecachedFromStaleRead: a lookup whose store read began before a
// removal emptied the caches does not put its (stale) answer back.
func TestRemovalNotRecachedFromStaleRead(t *testing.T) {
	h := newHarness(t)
	a := newTestAgent(t, "racy", "racy")
	h.register(t, a, "alice")
	stamp := h.reg.fresh.epoch.Load()
	rec := &Registered{HumanID: "x"}
	h.reg.fresh.removedHere() // a removal commits while the read is under way
	h.reg.registered.put("racy", rec, stamp)
	h.reg.registeredKeys.put(a.pub, "racy", stamp)
	if _, ok := h.reg.registered.get("racy"); ok {
		t.Error("an agent read before the caches were emptied was cached")
	}
	if _, ok := h.reg.registeredKeys.get(a.pub); ok {
		t.Error("a key read before the caches were emptied was cached")
	}
}

// TestRemoveBeforeHumanIndex: agents registered before the per-human index
// existed (no agent/ha/ entries) are found, listed and indexed on a removal, and
// the leaderboard is recomputed right.
func TestRemoveBeforeHumanIndex(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	var alice string
	var times []time.Time
	for i := range 3 {
		h.clock.Advance(time.Second)
		times = append(times, h.clock.Now())
		alice = h.register(t, newTestAgent(t, fmt.Sprintf("old-%d", i), fmt.Sprintf("old-%d", i)), "alice")
	}
	h.register(t, newTestAgent(t, "bobs", "bobs"), "bob")
	if err := h.store.Update(ctx, func(txn storage.Txn) error { // as an older release left it
		for i := range 3 {
			if err := txn.Delete(humanAgentKey(alice, fmt.Sprintf("old-%d", i))); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if owned, err := h.reg.HumanAgents(ctx, alice); err != nil || len(owned) != 3 || owned[0].DeviceID != "old-0" {
		t.Fatalf("HumanAgents before the index = %+v, %v", owned, err)
	}
	if _, err := h.reg.Remove(ctx, "old-0"); err != nil {
		t.Fatal(err)
	}
	b := h.board(t)
	if len(b) != 2 || b[0].HumanID != alice || b[0].AgentCount != 2 || !sameTime(b[0].EarliestRegisteredAt, times[1]) {
		t.Fatalf("leaderboard = %+v, want alice with 2 from %s", b, times[1])
	}
	indexed := 0
	_ = h.store.View(ctx, func(txn storage.Txn) error {
		return txn.Iterate(humanAgentsPrefix(alice), func(k, v []byte) (bool, error) {
			indexed++
			return true, nil
		})
	})
	if indexed != 2 {
		t.Errorf("alice's index has %d entries after the removal, want 2", indexed)
	}
}

// TestOwnerSession: an owner session is pending until the palm verifies it, then
// names the human for OwnerSessionTTL, checks its CSRF token, and ends on demand;
// a denied one names nobody.
func TestOwnerSession(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	alice := h.register(t, newTestAgent(t, "mine", "mine"), "alice")

	secret, o, c, err := h.reg.StartOwnerSession(ctx, palm.Request{BrowserIP: "192.0.2.1", BrowserSummary: "curl"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != OwnerPending || c.Purpose != palm.PurposeAgentManagement || c.Ref == secret {
		t.Fatalf("new session %+v, challenge %+v", o, c)
	}
	if got, err := h.reg.OwnerSession(ctx, secret); err != nil || got.Status != OwnerPending || got.HumanID != "" {
		t.Fatalf("pending session = %+v, %v", got, err)
	}
	if _, err := h.palm.DevScan(ctx, c.ID, c.Nonce, "alice"); err != nil {
		t.Fatal(err)
	}
	got, err := h.reg.OwnerSession(ctx, secret)
	if err != nil || got.Status != OwnerVerified || got.HumanID != alice {
		t.Fatalf("verified session = %+v, %v; want alice's", got, err)
	}
	if !got.CheckCSRF(o.CSRF) || got.CheckCSRF("") || got.CheckCSRF(o.CSRF+"x") {
		t.Error("CheckCSRF accepts the wrong token or refuses the right one")
	}
	for _, bad := range []string{"", "short", secret[:42] + "!"} {
		if _, err := h.reg.OwnerSession(ctx, bad); !errors.Is(err, ErrOwnerSessionNotFound) {
			t.Errorf("OwnerSession(%q) = %v, want not found", bad, err)
		}
	}
	h.clock.Advance(OwnerSessionTTL)
	if got, err := h.reg.OwnerSession(ctx, secret); err == nil && got.Status != OwnerExpired {
		t.Errorf("session after OwnerSessionTTL = %+v, want expired or gone", got)
	}

	secret, _, c, err = h.reg.StartOwnerSession(ctx, palm.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.reg.EndOwnerSession(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if _, err := h.reg.OwnerSession(ctx, secret); !errors.Is(err, ErrOwnerSessionNotFound) {
		t.Errorf("ended session = %v, want not found", err)
	}
	if _, err := h.palm.DevScan(ctx, c.ID, c.Nonce, "alice"); err != nil {
		t.Fatalf("a scan of an ended session's challenge: %v", err)
	}
	if _, err := h.reg.OwnerSession(ctx, secret); !errors.Is(err, ErrOwnerSessionNotFound) {
		t.Errorf("an ended session came back with the scan: %v", err)
	}

	secret, _, c, err = h.reg.StartOwnerSession(ctx, palm.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.palm.Deny(ctx, c.ID, c.Nonce); err != nil {
		t.Fatal(err)
	}
	if got, err := h.reg.OwnerSession(ctx, secret); err != nil || got.Status != OwnerDenied || got.HumanID != "" {
		t.Errorf("denied session = %+v, %v", got, err)
	}
}
