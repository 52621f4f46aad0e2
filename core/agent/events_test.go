package agent

import (
	"context"
	"testing"

	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/event/eventtest"
)

// TestRegistrationEvents: a registration emits started at init and, once the
// palm challenge's transaction has committed, verified (with the human), failed
// (the deviceId was registered meanwhile by another session) or denied; each
// event names the deviceId and the key's fingerprint, never the key. A
// signature check emits its result.
func TestRegistrationEvents(t *testing.T) {
	h := newHarness(t)
	var rec eventtest.Recorder
	h.reg.events = rec.Sink()
	a := newTestAgent(t, "agent-1", "events")
	rival := newTestAgent(t, "agent-1", "rival") // same deviceId, another key
	b := newTestAgent(t, "agent-2", "declined")

	s := h.init(t, a)
	sRival := h.init(t, rival)
	sB := h.init(t, b)
	humanID := h.scan(t, s, "alice").HumanID
	h.scan(t, sRival, "bob")
	h.deny(t, sB)

	started := func(x *testAgent) event.Event {
		return event.Event{Kind: event.Registration, Outcome: event.Started, DeviceID: x.deviceID, KeyFingerprint: Fingerprint(x.pub)}
	}
	ended := started(a)
	ended.Outcome, ended.HumanID = event.Verified, humanID
	failed := started(rival)
	failed.Outcome, failed.HumanID = event.Failed, h.human(t, "bob")
	denied := started(b)
	denied.Outcome = event.Denied
	want := []event.Event{started(a), started(rival), started(b), ended, failed, denied}
	got := rec.Take()
	if len(got) != len(want) {
		t.Fatalf("events = %+v\nwant %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}

	for _, tt := range []struct {
		name   string
		agent  *testAgent
		tamper bool
		want   event.Outcome
	}{
		{"registered", a, false, event.Registered},
		{"unregistered", b, false, event.Unregistered},
		{"bad signature", a, true, event.BadSignature},
	} {
		c, err := ParseChallenge(mustJSON(t, tt.agent.fields("any message", 1)))
		if err != nil {
			t.Fatal(err)
		}
		if tt.tamper {
			c.Message += "!"
		}
		if _, err := h.reg.VerifySignature(context.Background(), c); err != nil {
			t.Fatalf("%s: VerifySignature: %v", tt.name, err)
		}
		got := rec.Take()
		if len(got) != 1 || got[0] != (event.Event{Kind: event.SignatureCheck, Outcome: tt.want}) {
			t.Errorf("%s: events = %+v, want one signature check %s", tt.name, got, tt.want)
		}
	}
}

// TestRemovalEvent: a removal emits one AgentRemoved event, after its commit,
// naming the agent, its human and its key's fingerprint; a refused removal
// emits nothing.
func TestRemovalEvent(t *testing.T) {
	h := newHarness(t)
	var rec eventtest.Recorder
	a := newTestAgent(t, "agent-rm", "events-rm")
	humanID := h.scan(t, h.init(t, a), "alice").HumanID
	h.reg.events = rec.Sink()
	if _, err := h.reg.Remove(context.Background(), "no-such-agent"); err == nil {
		t.Fatal("an unknown agent was removed")
	}
	if got := rec.Take(); len(got) != 0 {
		t.Errorf("a refused removal emitted %+v", got)
	}
	if _, err := h.reg.Remove(context.Background(), a.deviceID); err != nil {
		t.Fatal(err)
	}
	want := event.Event{Kind: event.AgentRemoved, HumanID: humanID, DeviceID: a.deviceID, KeyFingerprint: Fingerprint(a.pub)}
	if got := rec.Take(); len(got) != 1 || got[0] != want {
		t.Errorf("events = %+v, want %+v", got, want)
	}
}
