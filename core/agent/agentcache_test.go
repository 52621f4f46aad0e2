package agent

import "testing"

// TestLookupsRemembered: a registered agent, once looked up by deviceId or by
// key, is answered again without reading the store (while no removal is seen:
// remove_test.go); an agent not yet registered is read each time, so its registration
// shows at once.
func TestLookupsRemembered(t *testing.T) {
	h := newHarness(t)
	counter := &keyReads{Store: h.store}
	h.reg.store = counter
	a := newTestAgent(t, "remembered", "remembered")

	for range 2 {
		if l := h.lookupDevice(t, "remembered"); l.Registered {
			t.Fatal("an unregistered agent looks registered")
		}
	}
	if n := counter.reads.Load() + counter.views.Load(); n != 2 {
		t.Errorf("%d store reads for two lookups of an unregistered agent, want 2 (absence is not remembered)", n)
	}
	h.reg.store = h.store
	h.register(t, a, "owner")
	h.reg.store = counter
	counter.reads.Store(0)
	counter.views.Store(0)
	for range 3 {
		if l := h.lookupDevice(t, "remembered"); !l.Registered || l.HumanID == "" {
			t.Fatalf("lookup after the registration = %+v", l)
		}
	}
	if n := counter.reads.Load() + counter.views.Load(); n != 1 {
		t.Errorf("%d store reads for three lookups by deviceId, want 1 (the first)", n)
	}
	for range 3 {
		if l := h.lookupKey(t, a); !l.Registered || l.HumanID == "" {
			t.Fatalf("key lookup after the registration = %+v", l)
		}
	}
	if n := counter.reads.Load() + counter.views.Load(); n != 2 {
		t.Errorf("%d store reads for three lookups each by deviceId and key, want 2 (the first of each)", n)
	}
}
