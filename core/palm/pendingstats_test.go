package palm

import (
	"slices"
	"testing"
	"time"
)

// TestPendingStats: each new challenge of a capped purpose counts one against
// its cap until its record's lifetime (ttl plus Grace) ends; a refused one counts
// nothing; a purpose without a cap is not listed.
func TestPendingStats(t *testing.T) {
	h := newPalmHarness(t, false)
	svc := cappedService(t, h, 2, -1)
	want := func(what string, login, reg int) {
		t.Helper()
		got := svc.PendingStats()
		exp := []Pending{{PurposeLogin, login, 2}, {PurposeAgentRegistration, reg, 2}}
		if !slices.Equal(got, exp) {
			t.Errorf("%s: PendingStats = %+v, want %+v", what, got, exp)
		}
	}
	want("at first", 0, 0)
	if _, err := svc.New(PurposeLogin, "r1", Request{}, time.Minute); err != nil {
		t.Fatal(err)
	}
	want("after one login", 1, 0)
	h.clock.Advance(10 * time.Second)
	if _, err := svc.New(PurposeLogin, "r2", Request{}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.New(PurposeAgentRegistration, "s1", Request{}, time.Minute); err != nil {
		t.Fatal(err)
	}
	want("after two logins and a registration", 2, 1)
	if _, err := svc.New(PurposeLogin, "r3", Request{}, time.Minute); err == nil {
		t.Fatal("a third login past the cap of 2 was accepted")
	}
	want("after a refused login", 2, 1)
	h.clock.Advance(time.Minute + Grace - 10*time.Second)
	want("once the first login's record lapsed", 1, 1)
	h.clock.Advance(10 * time.Second)
	want("once the others lapsed", 0, 0)

	uncapped, err := NewService(Config{Store: h.store, Now: h.clock.Now, Issuer: testIssuer, Attestors: []Attestor{h.a.attestor()},
		MaxPending: map[Purpose]int{PurposeLogin: 5}})
	if err != nil {
		t.Fatal(err)
	}
	if got := uncapped.PendingStats(); !slices.Equal(got, []Pending{{PurposeLogin, 0, 5}}) {
		t.Errorf("with only logins capped: %+v", got)
	}
}
