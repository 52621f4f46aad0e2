package palm

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/storage"
)

// TestScanURLLapses: a scan URL opens for ScanLifetime only; an app that opened it
// in time may still complete or deny for a short grace after, never later.
func TestScanURLLapses(t *testing.T) {
	ctx := context.Background()
	t.Run("opened in time, completed within the grace", func(t *testing.T) {
		h := newPalmHarness(t, false)
		c := h.challenge(t)
		h.lookup(t, c)
		h.clock.Advance(ScanLifetime)
		if _, err := h.svc.Lookup(ctx, c.ID, c.Nonce); !errors.Is(err, ErrScanLapsed) {
			t.Fatalf("Lookup of a lapsed scan URL: %v, want ErrScanLapsed", err)
		}
		h.clock.Advance(scanCompletionGrace / 2)
		if _, err := h.svc.Complete(ctx, c.ID, h.assert(t, h.a, c, "alice")); err != nil {
			t.Fatalf("Complete within the grace: %v", err)
		}
	})
	t.Run("after the grace", func(t *testing.T) {
		h := newPalmHarness(t, false)
		c := h.challenge(t)
		h.clock.Advance(ScanLifetime + scanCompletionGrace)
		if _, err := h.svc.Complete(ctx, c.ID, h.assert(t, h.a, c, "alice")); !errors.Is(err, ErrScanLapsed) {
			t.Errorf("Complete after the grace: %v, want ErrScanLapsed", err)
		}
		if _, err := h.svc.Deny(ctx, c.ID, c.Nonce); !errors.Is(err, ErrScanLapsed) {
			t.Errorf("Deny after the grace: %v, want ErrScanLapsed", err)
		}
		if got := len(h.outcome.verified) + len(h.outcome.denied); got != 0 {
			t.Errorf("%d outcomes recorded, want none", got)
		}
	})
	t.Run("unknown nonce", func(t *testing.T) {
		h := newPalmHarness(t, false)
		c := h.challenge(t)
		if _, err := h.svc.Lookup(ctx, c.ID, "AAAAAAAAAAAAAAAAAAAAAAAA"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Lookup with an unknown nonce: %v, want ErrNotFound", err)
		}
	})
}

// TestRenew: a page renews its scan URL once it is ScanRenewAfter old; the
// replaced URL no longer opens (ErrScanLapsed) but an app that opened it just
// before may still complete.
func TestRenew(t *testing.T) {
	ctx := context.Background()
	h := newPalmHarness(t, false)
	c := h.challenge(t)
	if want := c.ExpiresAt; time.Time(c.ScanExpiresAt).After(time.Time(want)) || !time.Time(c.ScanExpiresAt).Equal(h.clock.Now().Add(ScanLifetime)) {
		t.Errorf("ScanExpiresAt %s, want %s", c.ScanExpiresAt.Format(), h.clock.Now().Add(ScanLifetime))
	}
	same, err := h.svc.Renew(ctx, c.ID)
	if err != nil || same.Nonce != c.Nonce {
		t.Fatalf("Renew of a fresh scan URL = %v, %v; want the same nonce", same, err)
	}
	h.clock.Advance(ScanRenewAfter)
	renewed, err := h.svc.Renew(ctx, c.ID)
	if err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if renewed.Nonce == c.Nonce || !time.Time(renewed.ScanExpiresAt).Equal(h.clock.Now().Add(ScanLifetime)) {
		t.Fatalf("Renew after %s = nonce %q (was %q), scan expiry %s; want a new nonce for %s", ScanRenewAfter, renewed.Nonce, c.Nonce, renewed.ScanExpiresAt.Format(), ScanLifetime)
	}
	if _, err := h.svc.Lookup(ctx, c.ID, c.Nonce); !errors.Is(err, ErrScanLapsed) {
		t.Errorf("Lookup of the replaced scan URL: %v, want ErrScanLapsed", err)
	}
	h.lookup(t, renewed)
	if _, err := h.svc.Complete(ctx, c.ID, h.assert(t, h.a, c, "alice")); err != nil {
		t.Errorf("Complete with the nonce replaced a moment ago: %v", err)
	}
	h.clock.Advance(ScanRenewAfter)
	if done, err := h.svc.Renew(ctx, c.ID); err != nil || done.Nonce != renewed.Nonce || done.Status != StatusVerified {
		t.Errorf("Renew of a verified challenge = %+v, %v; want it unchanged", done, err)
	}
}

// TestPendingCap: past its purpose's cap of challenges created within their
// possible lifetime, New refuses with an Unavailable fault that says when to retry; the
// other purpose is not affected, and the cap frees itself as time passes.
func TestPendingCap(t *testing.T) {
	h := newPalmHarness(t, false)
	svc, err := NewService(Config{Store: h.store, Now: h.clock.Now, Issuer: testIssuer,
		Attestors: []Attestor{h.a.attestor()}, MaxPending: map[Purpose]int{PurposeLogin: 3}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := svc.New(PurposeLogin, "r", Request{}, testTTL); err != nil {
			t.Fatalf("New #%d: %v", i+1, err)
		}
		h.clock.Advance(time.Minute)
	}
	_, err = svc.New(PurposeLogin, "r", Request{}, testTTL)
	var busy *fault.Error
	if !errors.As(err, &busy) || busy.Class != fault.Unavailable || busy.RetryAfter <= 0 || busy.RetryAfter > testTTL+Grace {
		t.Fatalf("New past the cap: %v, want an Unavailable fault with a Retry-After within %s", err, testTTL+Grace)
	}
	if _, err := svc.New(PurposeAgentRegistration, "s", Request{}, testTTL); err != nil {
		t.Errorf("New of another purpose: %v", err)
	}
	h.clock.Advance(busy.RetryAfter)
	if _, err := svc.New(PurposeLogin, "r", Request{}, testTTL); err != nil {
		t.Errorf("New after Retry-After: %v", err)
	}
}

// ttlStore records the TTL of every Set under palm/c/.
type ttlStore struct {
	storage.Store
	mu   sync.Mutex
	ttls []time.Duration
}

type ttlTxn struct {
	storage.Txn
	s *ttlStore
}

func (s *ttlStore) Update(ctx context.Context, fn func(storage.Txn) error) error {
	return s.Store.Update(ctx, func(txn storage.Txn) error { return fn(ttlTxn{txn, s}) })
}

func (t ttlTxn) Set(key, value []byte, ttl time.Duration) error {
	if strings.HasPrefix(string(key), "palm/c/") {
		t.s.mu.Lock()
		t.s.ttls = append(t.s.ttls, ttl)
		t.s.mu.Unlock()
	}
	return t.Txn.Set(key, value, ttl)
}

func (s *ttlStore) last() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ttls[len(s.ttls)-1]
}

// TestRecordsKeptBriefly: an unfinished challenge (pending, denied) is kept only
// until Grace after it expires, so a flood of them fills bounded disk; a verified
// one a day.
func TestRecordsKeptBriefly(t *testing.T) {
	ctx := context.Background()
	h := newPalmHarness(t, false)
	rec := &ttlStore{Store: h.store}
	h.store = rec
	svc, err := NewService(Config{Store: rec, Now: h.clock.Now, Issuer: testIssuer, Attestors: []Attestor{h.a.attestor()}})
	if err != nil {
		t.Fatal(err)
	}
	h.svc = svc
	c := h.challenge(t)
	if got := rec.last(); got != testTTL+Grace {
		t.Errorf("pending challenge kept %s, want %s", got, testTTL+Grace)
	}
	if _, err := svc.Deny(ctx, c.ID, c.Nonce); err != nil {
		t.Fatal(err)
	}
	if got := rec.last(); got != testTTL+Grace {
		t.Errorf("denied challenge kept %s, want %s", got, testTTL+Grace)
	}
	c = h.challenge(t)
	if _, err := svc.Complete(ctx, c.ID, h.assert(t, h.a, c, "alice")); err != nil {
		t.Fatal(err)
	}
	if got := rec.last(); got != testTTL+VerifiedRetention {
		t.Errorf("verified challenge kept %s, want %s", got, testTTL+VerifiedRetention)
	}
}
