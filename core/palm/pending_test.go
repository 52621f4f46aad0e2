package palm

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/fault"
)

// cappedService is a Service of h's store and clock with the given caps on
// pending logins: in all, and per network.
func cappedService(t *testing.T, h *palmHarness, total, perNetwork int) *Service {
	t.Helper()
	svc, err := NewService(Config{Store: h.store, Now: h.clock.Now, Issuer: testIssuer,
		Attestors:            []Attestor{h.a.attestor()},
		MaxPending:           map[Purpose]int{PurposeLogin: total, PurposeAgentRegistration: total},
		MaxPendingPerNetwork: map[Purpose]int{PurposeLogin: perNetwork, PurposeAgentRegistration: perNetwork}})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// busyFault returns err as a busy fault (Unavailable for the global cap, TooMany for a
// network's, with a Retry-After), failing the test when it is not one.
func busyFault(t *testing.T, err error, what string) *fault.Error {
	t.Helper()
	var b *fault.Error
	if !errors.As(err, &b) || (b.Class != fault.Unavailable && b.Class != fault.TooMany) || b.RetryAfter <= 0 {
		t.Fatalf("%s: %v, want a busy fault with a Retry-After", what, err)
	}
	return b
}

// TestNetwork: an IPv4 address counts under its /24, an IPv6 address (or the
// edge's /64 key of one) under its /48; anything else is its own network.
func TestNetwork(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7":              "192.0.2.0/24",
		"192.0.2.255":            "192.0.2.0/24",
		"192.0.3.1":              "192.0.3.0/24",
		"::ffff:192.0.2.7":       "192.0.2.0/24",
		"2001:db8:1:2:3:4:5:6":   "2001:db8:1::/48",
		"2001:db8:1:2::/64":      "2001:db8:1::/48",
		"2001:db8:1:ffff::/64":   "2001:db8:1::/48",
		"2001:db8:2::1":          "2001:db8:2::/48",
		"not an address at all":  "not an address at all",
		"2001:db8:1:2::/64 junk": "2001:db8:1:2::/64 junk",
	} {
		if got := Network(in); got != want {
			t.Errorf("Network(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPendingCapPerNetwork: one /24 at its cap is refused with a busy fault of
// its network, while another /24 still gets in; the refusal's Retry-After is the
// time until the network's oldest challenge lapses, and then the network gets in
// again.
func TestPendingCapPerNetwork(t *testing.T) {
	h := newPalmHarness(t, false)
	svc := cappedService(t, h, 100, 3)
	for i := range 3 {
		if _, err := svc.New(PurposeLogin, "r", Request{Address: fmt.Sprintf("192.0.2.%d", i+1)}, testTTL); err != nil {
			t.Fatalf("New #%d from 192.0.2.0/24: %v", i+1, err)
		}
		h.clock.Advance(time.Minute)
	}
	_, err := svc.New(PurposeLogin, "r", Request{Address: "192.0.2.200"}, testTTL)
	b := busyFault(t, err, "a fourth login from 192.0.2.0/24")
	// The oldest was created three minutes ago and lapses testTTL+Grace after.
	if want := testTTL + Grace - 3*time.Minute; b.Class != fault.TooMany || b.Code != CodeTooManyPendingFromNetwork || b.RetryAfter != want {
		t.Errorf("refusal: %s (class %d), Retry-After %s; want the network's cap, %s", b.Code, b.Class, b.RetryAfter, want)
	}
	if _, err := svc.New(PurposeLogin, "r", Request{Address: "192.0.3.1"}, testTTL); err != nil {
		t.Errorf("New from another /24: %v", err)
	}
	if _, err := svc.New(PurposeLogin, "r", Request{}, testTTL); err != nil {
		t.Errorf("New counted under no network: %v", err)
	}
	if _, err := svc.New(PurposeAgentRegistration, "s", Request{Address: "192.0.2.9"}, testTTL); err != nil {
		t.Errorf("New of another purpose from the full /24: %v", err)
	}
	h.clock.Advance(b.RetryAfter - time.Millisecond)
	if _, err := svc.New(PurposeLogin, "r", Request{Address: "192.0.2.9"}, testTTL); err == nil {
		t.Error("the full /24 got in before its Retry-After")
	}
	h.clock.Advance(time.Millisecond)
	if _, err := svc.New(PurposeLogin, "r", Request{Address: "192.0.2.9"}, testTTL); err != nil {
		t.Errorf("New from the /24 at its Retry-After: %v", err)
	}
}

// TestPendingCapPerSlash48: IPv6 clients of one /48 (any of its /64s, as the edge
// keys them) share a count; another /48 has its own.
func TestPendingCapPerSlash48(t *testing.T) {
	h := newPalmHarness(t, false)
	svc := cappedService(t, h, 100, 2)
	for _, a := range []string{"2001:db8:1:2::/64", "2001:db8:1:ffff::/64"} {
		if _, err := svc.New(PurposeAgentRegistration, "s", Request{Address: a}, testTTL); err != nil {
			t.Fatalf("New from %s: %v", a, err)
		}
	}
	_, err := svc.New(PurposeAgentRegistration, "s", Request{Address: "2001:db8:1:3::/64"}, testTTL)
	if b := busyFault(t, err, "a third registration from 2001:db8:1::/48"); b.Class != fault.TooMany {
		t.Errorf("refused as %s, want the network 2001:db8:1::/48 at its cap", b.Code)
	}
	if _, err := svc.New(PurposeAgentRegistration, "s", Request{Address: "2001:db8:2:1::/64"}, testTTL); err != nil {
		t.Errorf("New from another /48: %v", err)
	}
}

// TestPendingCapRetryAfter: the global cap's Retry-After is exactly the time
// until the oldest counted challenge lapses (no rounding up to a time slot), at
// least a second; filling it takes total/perNetwork networks.
func TestPendingCapRetryAfter(t *testing.T) {
	h := newPalmHarness(t, false)
	svc := cappedService(t, h, 4, 2)
	h.clock.Advance(1234 * time.Millisecond) // off any round slot
	for i := range 4 {
		if _, err := svc.New(PurposeLogin, "r", Request{Address: fmt.Sprintf("198.51.%d.1", i/2)}, testTTL); err != nil {
			t.Fatalf("New #%d: %v", i+1, err)
		}
		h.clock.Advance(7 * time.Second)
	}
	_, err := svc.New(PurposeLogin, "r", Request{Address: "203.0.113.1"}, testTTL)
	b := busyFault(t, err, "New from a fresh network past the global cap")
	if want := testTTL + Grace - 28*time.Second; b.Class != fault.Unavailable || b.Code != CodeTooManyPending || b.RetryAfter != want {
		t.Errorf("refusal: %s, Retry-After %s; want the global cap, %s", b.Code, b.RetryAfter, want)
	}
	// A network at its own cap while the global one is full waits for both.
	_, err = svc.New(PurposeLogin, "r", Request{Address: "198.51.1.9"}, testTTL)
	if b := busyFault(t, err, "New from a full network past the global cap"); b.RetryAfter != testTTL+Grace-14*time.Second {
		t.Errorf("Retry-After %s, want %s (its network's oldest)", b.RetryAfter, testTTL+Grace-14*time.Second)
	}
	h.clock.Advance(testTTL + Grace - 28*time.Second - 300*time.Millisecond)
	_, err = svc.New(PurposeLogin, "r", Request{Address: "203.0.113.1"}, testTTL)
	if b := busyFault(t, err, "New 0.3s before the oldest lapses"); b.RetryAfter != time.Second {
		t.Errorf("Retry-After %s, want the floor of 1s", b.RetryAfter)
	}
	h.clock.Advance(300 * time.Millisecond)
	if _, err := svc.New(PurposeLogin, "r", Request{Address: "203.0.113.1"}, testTTL); err != nil {
		t.Errorf("New once the oldest lapsed: %v", err)
	}
}

// TestPendingCapForgetsNetworks: the counts keep no network whose challenges
// have all lapsed, so their memory stays within the global cap.
func TestPendingCapForgetsNetworks(t *testing.T) {
	h := newPalmHarness(t, false)
	svc := cappedService(t, h, 1000, 10)
	for i := range 300 {
		if _, err := svc.New(PurposeLogin, "r", Request{Address: fmt.Sprintf("10.%d.%d.1", i/256, i%256)}, testTTL); err != nil {
			t.Fatal(err)
		}
	}
	count := svc.pending.counts[PurposeLogin]
	if len(count.nets) != 300 || len(count.all) != 300 {
		t.Fatalf("counted %d networks, %d challenges; want 300 of each", len(count.nets), len(count.all))
	}
	h.clock.Advance(testTTL + Grace)
	if _, err := svc.New(PurposeLogin, "r", Request{Address: "192.0.2.1"}, testTTL); err != nil {
		t.Fatal(err)
	}
	if len(count.nets) != 1 || len(count.all) != 1 {
		t.Errorf("after the others lapsed: %d networks, %d challenges counted; want 1 of each", len(count.nets), len(count.all))
	}
}

// TestReleaseGivesBackThePlace: a challenge that is never stored (its request
// was refused) gives its place under the caps back, in all and in its network,
// once; the places of the others stay counted, in their order.
func TestReleaseGivesBackThePlace(t *testing.T) {
	h := newPalmHarness(t, false)
	svc := cappedService(t, h, 3, 2)
	newFrom := func(addr string) (*Challenge, error) {
		return svc.New(PurposeLogin, "ref", Request{Address: addr}, time.Minute)
	}
	a, err := newFrom("192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := newFrom("192.0.2.2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newFrom("192.0.2.3"); err == nil {
		t.Fatal("a third challenge of a network with a cap of 2 was counted")
	}
	svc.Release(b)
	svc.Release(b) // twice: nothing more
	c, err := newFrom("192.0.2.3")
	if err != nil {
		t.Fatalf("a challenge after a release: %v", err)
	}
	busyFault(t, func() error { _, err := newFrom("192.0.2.4"); return err }(), "the network full again")
	if _, err := newFrom("198.51.100.1"); err != nil {
		t.Fatalf("another network: %v", err)
	}
	busyFault(t, func() error { _, err := newFrom("203.0.113.1"); return err }(), "the global cap full")
	svc.Release(a)
	if got := svc.PendingStats()[0].Count; got != 2 {
		t.Errorf("count after releasing a: %d, want 2 (c and the other network's)", got)
	}
	svc.Release(c)
	if _, err := newFrom("192.0.2.5"); err != nil {
		t.Fatalf("the network after releasing all of its challenges: %v", err)
	}
}
