package agent

import (
	"context"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/internal/clocktest"
	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/memstore"
)

const (
	testIssuer     = "https://id.example.com"
	testSessionTTL = 15 * time.Minute
	testMaxAge     = 5 * time.Minute
)

// fakeClock is the injected clock: tests move it, nothing sleeps.
type fakeClock = clocktest.Clock

func newFakeClock() *fakeClock {
	return clocktest.New(time.Date(2026, 11, 21, 20, 0, 0, 123_000_000, time.UTC))
}

// harness is a registry on storage/memstore with a dev-mode palm service.
type harness struct {
	clock *fakeClock
	store storage.Store
	palm  *palm.Service
	reg   *Service
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessOn(t, memstore.New()) // core's rules, not a database's, are under test
}

// newHarnessOn is newHarness on store.
func newHarnessOn(t *testing.T, store storage.Store) *harness {
	t.Helper()
	clock := newFakeClock()
	p, err := palm.NewService(palm.Config{Store: store, Now: clock.Now, Issuer: testIssuer, Dev: true})
	if err != nil {
		t.Fatalf("palm.NewService: %v", err)
	}
	reg := NewService(Config{
		Store: store, Palm: p, Now: clock.Now, Issuer: testIssuer,
		SessionTTL: testSessionTTL, ChallengeMaxAge: testMaxAge,
	})
	return &harness{clock: clock, store: store, palm: p, reg: reg}
}

// init starts a registration for a at the current time.
func (h *harness) init(t *testing.T, a *testAgent) *Session {
	t.Helper()
	s, err := h.reg.Init(context.Background(), a.registration(t, h.clock.Now()), "")
	if err != nil {
		t.Fatalf("Init(%s): %v", a.deviceID, err)
	}
	return s
}

// scan completes the session's palm challenge as person palmSubject, through a
// scan URL the owner's page has just shown (renewed if due).
func (h *harness) scan(t *testing.T, s *Session, palmSubject string) *palm.Challenge {
	t.Helper()
	ctx := context.Background()
	c, err := h.reg.Challenge(ctx, s, true)
	if err != nil {
		t.Fatalf("Challenge(%s): %v", s.ID, err)
	}
	done, err := h.palm.DevScan(ctx, c.ID, c.Nonce, palmSubject)
	if err != nil {
		t.Fatalf("DevScan: %v", err)
	}
	return done
}

// deny declines the session's palm challenge.
func (h *harness) deny(t *testing.T, s *Session) {
	t.Helper()
	ctx := context.Background()
	c, err := h.reg.Challenge(ctx, s, true)
	if err != nil {
		t.Fatalf("Challenge(%s): %v", s.ID, err)
	}
	if _, err := h.palm.Deny(ctx, c.ID, c.Nonce); err != nil {
		t.Fatalf("Deny: %v", err)
	}
}

// register runs a whole registration of a, owned by palmSubject, and returns the human.
func (h *harness) register(t *testing.T, a *testAgent, palmSubject string) string {
	t.Helper()
	s := h.init(t, a)
	c := h.scan(t, s, palmSubject)
	if got := h.session(t, s.ID); got.Status != SessionCompleted {
		t.Fatalf("session of %s is %s after the scan, want completed", a.deviceID, got.Status)
	}
	return c.HumanID
}

func (h *harness) session(t *testing.T, id string) *Session {
	t.Helper()
	s, err := h.reg.Session(context.Background(), id)
	if err != nil {
		t.Fatalf("Session(%s): %v", id, err)
	}
	return s
}

// human returns the human behind palmSubject, through a login challenge.
func (h *harness) human(t *testing.T, palmSubject string) string {
	t.Helper()
	ctx := context.Background()
	c, err := h.palm.New(palm.PurposeLogin, "auth-request", palm.Request{ClientName: "Test"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.store.Update(ctx, func(txn storage.Txn) error { return h.palm.PutChallenge(txn, c) }); err != nil {
		t.Fatal(err)
	}
	done, err := h.palm.DevScan(ctx, c.ID, c.Nonce, palmSubject)
	if err != nil {
		t.Fatalf("DevScan: %v", err)
	}
	return done.HumanID
}

func (h *harness) lookupDevice(t *testing.T, deviceID string) *Lookup {
	t.Helper()
	l, err := h.reg.LookupDevice(context.Background(), deviceID)
	if err != nil {
		t.Fatalf("LookupDevice(%q): %v", deviceID, err)
	}
	return l
}

func (h *harness) lookupKey(t *testing.T, a *testAgent) *Lookup {
	t.Helper()
	l, err := h.reg.LookupPublicKey(context.Background(), a.pub)
	if err != nil {
		t.Fatalf("LookupPublicKey(%s): %v", a.deviceID, err)
	}
	return l
}

func sameTime(a Time, b time.Time) bool { return time.Time(a).Equal(b) }
