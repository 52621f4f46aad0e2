package palm

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/memstore"
)

const testTTL = 5 * time.Minute

// recordingOutcome records the ends of challenges; fail makes Verified fail.
type recordingOutcome struct {
	verified []string // human ids
	denied   []string // challenge ids
	fail     error
}

func (o *recordingOutcome) Verified(txn storage.Txn, c *Challenge, humanID string) error {
	if o.fail != nil {
		return o.fail
	}
	if c.HumanID != humanID || c.Status != StatusVerified {
		return errors.New("outcome sees a challenge that is not verified by humanID")
	}
	o.verified = append(o.verified, humanID)
	return nil
}

func (o *recordingOutcome) Denied(txn storage.Txn, c *Challenge) error {
	o.denied = append(o.denied, c.ID)
	return nil
}

// palmHarness is a Service on storage/memstore, with two attestors the test
// controls (Ed25519 "engine-a", P-256 "engine-b"), and optionally dev mode.
type palmHarness struct {
	clock   *fakeClock
	store   storage.Store
	svc     *Service
	a, b    *testAttestor
	outcome *recordingOutcome
}

func newPalmHarness(t *testing.T, dev bool) *palmHarness {
	t.Helper()
	store := memstore.New() // core's rules, not a database's, are under test
	h := &palmHarness{
		clock: newFakeClock(), store: store,
		a: newEd25519Attestor(t, "engine-a"), b: newP256Attestor(t, "engine-b"),
		outcome: &recordingOutcome{},
	}
	var err error
	h.svc, err = NewService(Config{
		Store: store, Now: h.clock.Now, Issuer: testIssuer,
		Attestors: []Attestor{h.a.attestor(), h.b.attestor()}, Dev: dev,
	})
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	h.svc.Handle(PurposeLogin, h.outcome)
	return h
}

// challenge creates and stores a pending login challenge.
func (h *palmHarness) challenge(t *testing.T) *Challenge {
	t.Helper()
	c, err := h.svc.New(PurposeLogin, "auth-request-1", Request{ClientName: "Example App", Scopes: []string{"openid"}}, testTTL)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := h.store.Update(context.Background(), func(txn storage.Txn) error { return h.svc.PutChallenge(txn, c) }); err != nil {
		t.Fatalf("PutChallenge: %v", err)
	}
	return c
}

// assert makes attestor a's assertion, at the current time, that subject answered c.
func (h *palmHarness) assert(t *testing.T, a *testAttestor, c *Challenge, subject string) string {
	t.Helper()
	return a.sign(t, a.claims(h.clock.Now(), c.ID, c.Nonce, subject))
}

func (h *palmHarness) complete(t *testing.T, a *testAttestor, subject string) *Challenge {
	t.Helper()
	c := h.challenge(t)
	done, err := h.svc.Complete(context.Background(), c.ID, h.assert(t, a, c, subject))
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	return done
}

func (h *palmHarness) lookup(t *testing.T, c *Challenge) *Challenge {
	t.Helper()
	got, err := h.svc.Lookup(context.Background(), c.ID, c.Nonce)
	if err != nil {
		t.Fatalf("Lookup: %v", err)
	}
	return got
}

func TestNewChallengeAndLookup(t *testing.T) {
	h := newPalmHarness(t, false)
	now := h.clock.Now()
	c := h.challenge(t)
	if _, err := uuid.Parse(c.ID); err != nil {
		t.Errorf("challenge id %q is not a uuid", c.ID)
	}
	if len(c.Nonce) < 22 || strings.ContainsAny(c.Nonce, "+/=") {
		t.Errorf("nonce %q is not base64url of 128 bits or more", c.Nonce)
	}
	if c.Status != StatusPending || c.Purpose != PurposeLogin || !time.Time(c.ExpiresAt).Equal(now.Add(testTTL)) {
		t.Errorf("challenge = %+v", c)
	}
	if other := h.challenge(t); other.ID == c.ID || other.Nonce == c.Nonce {
		t.Error("two challenges share an id or a nonce")
	}
	if got, want := h.svc.ScanURL(c), testIssuer+"/v1/palm/challenges/"+c.ID+"?nonce="+c.Nonce; got != want {
		t.Errorf("ScanURL = %q, want %q", got, want)
	}

	got := h.lookup(t, c)
	if got.ID != c.ID || got.Status != StatusPending || got.Ref != "auth-request-1" || got.Request.ClientName != "Example App" {
		t.Errorf("Lookup = %+v", got)
	}
	for name, q := range map[string][2]string{
		"wrong nonce":    {c.ID, c.Nonce + "x"},
		"empty nonce":    {c.ID, ""},
		"unknown id":     {uuid.NewString(), c.Nonce},
		"id not a uuid":  {"../" + c.ID, c.Nonce},
		"urn form of id": {"urn:uuid:" + c.ID, c.Nonce},
	} {
		if _, err := h.svc.Lookup(context.Background(), q[0], q[1]); !errors.Is(err, ErrNotFound) {
			t.Errorf("Lookup with %s: %v, want ErrNotFound", name, err)
		}
	}

	h.clock.Advance(testTTL)
	if got := h.lookup(t, c); got.Status != StatusExpired {
		t.Errorf("status at expiresAt = %s, want expired", got.Status)
	}
}

func TestComplete(t *testing.T) {
	h := newPalmHarness(t, false)
	c := h.challenge(t)
	h.clock.Advance(time.Minute)
	done, err := h.svc.Complete(context.Background(), c.ID, h.assert(t, h.a, c, "alice"))
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if done.Status != StatusVerified {
		t.Errorf("status = %s, want verified", done.Status)
	}
	if _, err := uuid.Parse(done.HumanID); err != nil {
		t.Errorf("humanId %q is not a uuid", done.HumanID)
	}
	if len(h.outcome.verified) != 1 || h.outcome.verified[0] != done.HumanID {
		t.Errorf("outcome saw %v, want exactly [%s]", h.outcome.verified, done.HumanID)
	}
	got := h.lookup(t, c)
	if got.Status != StatusVerified || got.HumanID != done.HumanID {
		t.Errorf("stored challenge = %+v", got)
	}
	// Verified stays verified past expiry.
	h.clock.Advance(testTTL)
	if got := h.lookup(t, c); got.Status != StatusVerified {
		t.Errorf("status after expiresAt = %s, want verified", got.Status)
	}
}

func TestCompleteRefused(t *testing.T) {
	tests := []struct {
		name string
		// run acts on a fresh pending challenge and returns the error of the
		// completion attempt under test.
		run  func(t *testing.T, h *palmHarness, c *Challenge) error
		want error
	}{
		{"second completion", func(t *testing.T, h *palmHarness, c *Challenge) error {
			if _, err := h.svc.Complete(context.Background(), c.ID, h.assert(t, h.a, c, "alice")); err != nil {
				t.Fatalf("first Complete: %v", err)
			}
			_, err := h.svc.Complete(context.Background(), c.ID, h.assert(t, h.a, c, "alice"))
			return err
		}, ErrNotPending},
		{"second completion by someone else", func(t *testing.T, h *palmHarness, c *Challenge) error {
			if _, err := h.svc.Complete(context.Background(), c.ID, h.assert(t, h.a, c, "alice")); err != nil {
				t.Fatalf("first Complete: %v", err)
			}
			_, err := h.svc.Complete(context.Background(), c.ID, h.assert(t, h.b, c, "mallory"))
			return err
		}, ErrNotPending},
		{"after expiry", func(t *testing.T, h *palmHarness, c *Challenge) error {
			h.clock.Advance(testTTL)
			_, err := h.svc.Complete(context.Background(), c.ID, h.assert(t, h.a, c, "alice"))
			return err
		}, ErrExpired},
		{"after deny", func(t *testing.T, h *palmHarness, c *Challenge) error {
			if _, err := h.svc.Deny(context.Background(), c.ID, c.Nonce); err != nil {
				t.Fatalf("Deny: %v", err)
			}
			_, err := h.svc.Complete(context.Background(), c.ID, h.assert(t, h.a, c, "alice"))
			return err
		}, ErrNotPending},
		{"nonce mismatch", func(t *testing.T, h *palmHarness, c *Challenge) error {
			a := h.a.sign(t, h.a.claims(h.clock.Now(), c.ID, c.Nonce+"x", "alice"))
			_, err := h.svc.Complete(context.Background(), c.ID, a)
			return err
		}, ErrBadAssertion},
		{"assertion for another challenge", func(t *testing.T, h *palmHarness, c *Challenge) error {
			other := h.challenge(t)
			_, err := h.svc.Complete(context.Background(), c.ID, h.assert(t, h.a, other, "alice"))
			return err
		}, ErrBadAssertion},
		{"challenge claim names another challenge", func(t *testing.T, h *palmHarness, c *Challenge) error {
			other := h.challenge(t)
			a := h.a.sign(t, h.a.claims(h.clock.Now(), other.ID, c.Nonce, "alice"))
			_, err := h.svc.Complete(context.Background(), c.ID, a)
			return err
		}, ErrBadAssertion},
		{"another challenge's nonce", func(t *testing.T, h *palmHarness, c *Challenge) error {
			other := h.challenge(t)
			a := h.a.sign(t, h.a.claims(h.clock.Now(), c.ID, other.Nonce, "alice"))
			_, err := h.svc.Complete(context.Background(), c.ID, a)
			return err
		}, ErrBadAssertion},
		{"unknown challenge", func(t *testing.T, h *palmHarness, c *Challenge) error {
			ghost := &Challenge{ID: uuid.NewString(), Nonce: c.Nonce}
			_, err := h.svc.Complete(context.Background(), ghost.ID, h.assert(t, h.a, ghost, "alice"))
			return err
		}, ErrNotFound},
		{"wrong audience", func(t *testing.T, h *palmHarness, c *Challenge) error {
			claims := h.a.claims(h.clock.Now(), c.ID, c.Nonce, "alice")
			claims["aud"] = "https://other.example.com"
			_, err := h.svc.Complete(context.Background(), c.ID, h.a.sign(t, claims))
			return err
		}, ErrBadAssertion},
		{"malformed", func(t *testing.T, h *palmHarness, c *Challenge) error {
			_, err := h.svc.Complete(context.Background(), c.ID, "not-a-jws")
			return err
		}, ErrMalformed},
		{"dev scan without dev mode", func(t *testing.T, h *palmHarness, c *Challenge) error {
			_, err := h.svc.DevScan(context.Background(), c.ID, c.Nonce, "alice")
			return err
		}, ErrNoDevAttestor},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newPalmHarness(t, false)
			c := h.challenge(t)
			before := len(h.outcome.verified)
			err := tt.run(t, h, c)
			if !errors.Is(err, tt.want) {
				t.Fatalf("error = %v, want %v", err, tt.want)
			}
			if tt.want == ErrBadAssertion || tt.want == ErrMalformed || tt.want == ErrExpired || tt.want == ErrNoDevAttestor {
				if got := h.lookup(t, c).Status; got != c.StatusAt(h.clock.Now()) {
					t.Errorf("refused completion left status %s", got)
				}
				if len(h.outcome.verified) != before {
					t.Errorf("refused completion reached the outcome: %v", h.outcome.verified)
				}
			}
		})
	}
}

func TestDeny(t *testing.T) {
	h := newPalmHarness(t, false)
	c := h.challenge(t)
	if _, err := h.svc.Deny(context.Background(), c.ID, "wrong"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Deny with a wrong nonce: %v, want ErrNotFound", err)
	}
	done, err := h.svc.Deny(context.Background(), c.ID, c.Nonce)
	if err != nil {
		t.Fatalf("Deny: %v", err)
	}
	if done.Status != StatusDenied || done.HumanID != "" {
		t.Errorf("denied challenge = %+v", done)
	}
	if got := h.lookup(t, c).Status; got != StatusDenied {
		t.Errorf("stored status = %s, want denied", got)
	}
	if len(h.outcome.denied) != 1 || h.outcome.denied[0] != c.ID || len(h.outcome.verified) != 0 {
		t.Errorf("outcome saw denied %v verified %v", h.outcome.denied, h.outcome.verified)
	}
	if _, err := h.svc.Deny(context.Background(), c.ID, c.Nonce); !errors.Is(err, ErrNotPending) {
		t.Errorf("second Deny: %v, want ErrNotPending", err)
	}
	expired := h.challenge(t)
	h.clock.Advance(testTTL)
	if _, err := h.svc.Deny(context.Background(), expired.ID, expired.Nonce); !errors.Is(err, ErrExpired) {
		t.Errorf("Deny after expiry: %v, want ErrExpired", err)
	}
}

func TestHumans(t *testing.T) {
	h := newPalmHarness(t, false)
	const alice, bob = "subject-alice", "subject-bob"
	aliceID := h.complete(t, h.a, alice).HumanID
	tests := []struct {
		name     string
		attestor *testAttestor
		subject  string
		same     bool
	}{
		{"same attestor, same subject", h.a, alice, true},
		{"same attestor, another subject", h.a, bob, false},
		{"another attestor, same subject", h.b, alice, false},
		{"subject differing in case", h.a, strings.ToUpper(alice), false},
		{"subject with a trailing space", h.a, alice + " ", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := h.complete(t, tt.attestor, tt.subject).HumanID
			if (got == aliceID) != tt.same {
				t.Errorf("humanId %s vs alice's %s: same = %v, want %v", got, aliceID, got == aliceID, tt.same)
			}
		})
	}
	if again := h.complete(t, h.b, alice).HumanID; again != h.complete(t, h.b, alice).HumanID {
		t.Error("the second attestor's alice maps to two humans")
	}
	// No record holds a raw palm subject.
	err := h.store.View(context.Background(), func(txn storage.Txn) error {
		return txn.Iterate(nil, func(key, value []byte) (bool, error) {
			for _, b := range [][]byte{key, value} {
				if bytes.Contains(bytes.ToLower(b), []byte("subject-")) {
					t.Errorf("record %q = %q holds a palm subject", key, value)
				}
			}
			return true, nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestOutcomeCalledOnce(t *testing.T) {
	h := newPalmHarness(t, true)
	c := h.challenge(t)
	done, err := h.svc.DevScan(context.Background(), c.ID, c.Nonce, "alice")
	if err != nil {
		t.Fatalf("DevScan: %v", err)
	}
	// Failed attempts after the completion do not reach the outcome again.
	if _, err := h.svc.DevScan(context.Background(), c.ID, c.Nonce, "alice"); !errors.Is(err, ErrNotPending) {
		t.Errorf("second DevScan: %v, want ErrNotPending", err)
	}
	if _, err := h.svc.Complete(context.Background(), c.ID, h.assert(t, h.a, c, "bob")); !errors.Is(err, ErrNotPending) {
		t.Errorf("Complete after DevScan: %v, want ErrNotPending", err)
	}
	if _, err := h.svc.Deny(context.Background(), c.ID, c.Nonce); !errors.Is(err, ErrNotPending) {
		t.Errorf("Deny after DevScan: %v, want ErrNotPending", err)
	}
	if len(h.outcome.verified) != 1 || h.outcome.verified[0] != done.HumanID {
		t.Errorf("Verified calls = %v, want exactly [%s]", h.outcome.verified, done.HumanID)
	}
	if len(h.outcome.denied) != 0 {
		t.Errorf("Denied calls = %v, want none", h.outcome.denied)
	}
}

func TestOutcomeErrorRollsBack(t *testing.T) {
	h := newPalmHarness(t, false)
	boom := errors.New("outcome failed")
	h.outcome.fail = boom
	c := h.challenge(t)
	if _, err := h.svc.Complete(context.Background(), c.ID, h.assert(t, h.a, c, "alice")); !errors.Is(err, boom) {
		t.Fatalf("Complete: %v, want the outcome's error", err)
	}
	if got := h.lookup(t, c); got.Status != StatusPending || got.HumanID != "" {
		t.Errorf("challenge after a failed outcome = %+v, want pending", got)
	}
	humans := 0
	err := h.store.View(context.Background(), func(txn storage.Txn) error {
		return txn.Iterate([]byte("palm/h/"), func(_, _ []byte) (bool, error) { humans++; return true, nil })
	})
	if err != nil || humans != 0 {
		t.Errorf("%d humans stored after a rolled back completion (%v)", humans, err)
	}
	h.outcome.fail = nil
	if done, err := h.svc.Complete(context.Background(), c.ID, h.assert(t, h.a, c, "alice")); err != nil || done.Status != StatusVerified {
		t.Errorf("retry after the failure: %+v, %v", done, err)
	}
}

func TestDevScan(t *testing.T) {
	h := newPalmHarness(t, true)
	if !h.svc.Dev() {
		t.Fatal("Dev() = false in dev mode")
	}
	c := h.challenge(t)
	for name, tt := range map[string]struct {
		nonce, subject string
		want           error
	}{
		"wrong nonce":   {c.Nonce + "x", "alice", ErrNotFound},
		"empty subject": {c.Nonce, "", ErrMalformed},
		"long subject":  {c.Nonce, strings.Repeat("s", maxPalmSubjectLen+1), ErrMalformed},
	} {
		if _, err := h.svc.DevScan(context.Background(), c.ID, tt.nonce, tt.subject); !errors.Is(err, tt.want) {
			t.Errorf("DevScan with %s: %v, want %v", name, err, tt.want)
		}
	}
	done, err := h.svc.DevScan(context.Background(), c.ID, c.Nonce, "alice")
	if err != nil || done.Status != StatusVerified {
		t.Fatalf("DevScan: %+v, %v", done, err)
	}
	// The dev attestor is an attestor of its own: its alice is not engine-a's.
	if other := h.complete(t, h.a, "alice").HumanID; other == done.HumanID {
		t.Error("dev alice and engine-a alice are the same human")
	}
	if again, err := h.svc.DevScan(context.Background(), h.challenge(t).ID, "", "alice"); err == nil {
		t.Errorf("DevScan with an empty nonce completed: %+v", again)
	}
}

func TestNewService(t *testing.T) {
	store := memstore.New() // core's rules, not a database's, are under test
	ed := newEd25519Attestor(t, "engine-a")
	tests := []struct {
		name    string
		cfg     Config
		ok, dev bool
	}{
		{"no attestor and no dev", Config{Store: store, Issuer: testIssuer}, false, false},
		{"dev only", Config{Store: store, Issuer: testIssuer, Dev: true}, true, true},
		{"attestor only", Config{Store: store, Issuer: testIssuer, Attestors: []Attestor{ed.attestor()}}, true, false},
		{"attestor named like the dev one", Config{Store: store, Issuer: testIssuer, Dev: true,
			Attestors: []Attestor{{Name: DevAttestorName, Key: ed.priv.Public()}}}, false, false},
		{"bad attestor key", Config{Store: store, Issuer: testIssuer, Attestors: []Attestor{{Name: "x", Key: "key"}}}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc, err := NewService(tt.cfg)
			if !tt.ok {
				if err == nil {
					t.Fatal("NewService accepted")
				}
				return
			}
			if err != nil {
				t.Fatalf("NewService: %v", err)
			}
			if svc.Dev() != tt.dev {
				t.Errorf("Dev() = %v, want %v", svc.Dev(), tt.dev)
			}
		})
	}
}

// countingStore counts the transactions run on a Store.
type countingStore struct {
	storage.Store
	n atomic.Int64
}

func (s *countingStore) Update(ctx context.Context, fn func(storage.Txn) error) error {
	s.n.Add(1)
	return s.Store.Update(ctx, fn)
}

func (s *countingStore) View(ctx context.Context, fn func(storage.Txn) error) error {
	s.n.Add(1)
	return s.Store.View(ctx, fn)
}

// TestMalformedIDReadsNothing: a challenge id that is not a UUID is not found
// without a transaction, on every path that takes one from a URL.
func TestMalformedIDReadsNothing(t *testing.T) {
	h := newPalmHarness(t, true)
	store := &countingStore{Store: h.store}
	svc, err := NewService(Config{Store: store, Now: h.clock.Now, Issuer: testIssuer, Attestors: []Attestor{h.a.attestor()}, Dev: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const id = "not-a-challenge-id"
	for name, call := range map[string]func() error{
		"Deny":    func() error { _, err := svc.Deny(ctx, id, "nonce"); return err },
		"Lookup":  func() error { _, err := svc.Lookup(ctx, id, "nonce"); return err },
		"Renew":   func() error { _, err := svc.Renew(ctx, id); return err },
		"DevScan": func() error { _, err := svc.DevScan(ctx, id, "nonce", "alice"); return err },
	} {
		if err := call(); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s(%q) = %v, want ErrNotFound", name, id, err)
		}
	}
	if n := store.n.Load(); n != 0 {
		t.Errorf("%d transactions for malformed ids, want 0", n)
	}
}
