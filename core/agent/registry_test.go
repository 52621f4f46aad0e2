package agent

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/storage"
)

func TestInitCreatesPendingSession(t *testing.T) {
	h := newHarness(t)
	a := newTestAgent(t, "agent-1", "init")
	now := h.clock.Now()
	s := h.init(t, a)

	if s.Status != SessionPending || s.DeviceID != "agent-1" || s.PublicKey != EncodePublicKey(a.pub) {
		t.Errorf("session = %+v", s)
	}
	if !sameTime(s.ExpiresAt, now.Add(testSessionTTL)) {
		t.Errorf("expiresAt = %s, want %s", s.ExpiresAt.Format(), now.Add(testSessionTTL))
	}
	if !time.Time(s.RegisteredAt).IsZero() {
		t.Errorf("registeredAt = %s on a pending session", s.RegisteredAt.Format())
	}
	if got, want := h.reg.RegistrationURL(s.ID), testIssuer+"/v1/agent/register/"+s.ID+"/verify"; got != want {
		t.Errorf("RegistrationURL = %q, want %q", got, want)
	}

	stored := h.session(t, s.ID)
	if stored.Status != SessionPending || stored.ChallengeID != s.ChallengeID || !sameTime(stored.ExpiresAt, now.Add(testSessionTTL)) {
		t.Errorf("stored session = %+v", stored)
	}
	c, err := h.reg.Challenge(context.Background(), s, false)
	if err != nil {
		t.Fatalf("Challenge: %v", err)
	}
	if c.Purpose != palm.PurposeAgentRegistration || c.Status != palm.StatusPending || c.Request.DeviceID != "agent-1" || c.Ref != s.ID {
		t.Errorf("palm challenge = %+v", c)
	}
	if !sameTime(c.ExpiresAt, now.Add(testSessionTTL)) {
		t.Errorf("palm challenge expires %s, want %s", c.ExpiresAt.Format(), now.Add(testSessionTTL))
	}
	if l := h.lookupDevice(t, "agent-1"); l.Registered {
		t.Error("agent is registered before its owner's palm scan")
	}
}

func TestInitRefused(t *testing.T) {
	tests := []struct {
		name string
		// challenge returns the challenge to init, given a harness where "taken"
		// (key seed "taken") is already registered.
		challenge func(t *testing.T, h *harness) *Challenge
		kind      error
		code      string
	}{
		{
			name: "replayed message",
			challenge: func(t *testing.T, h *harness) *Challenge {
				a := newTestAgent(t, "fresh", "fresh")
				c := a.registration(t, h.clock.Now())
				if _, err := h.reg.Init(context.Background(), c, ""); err != nil {
					t.Fatalf("first Init: %v", err)
				}
				h.clock.Advance(time.Minute) // still within the age window
				return c
			},
			kind: ErrInvalid, code: CodeReplayed,
		},
		{
			name: "replayed message under another deviceId",
			challenge: func(t *testing.T, h *harness) *Challenge {
				c := newTestAgent(t, "fresh", "fresh").registration(t, h.clock.Now())
				if _, err := h.reg.Init(context.Background(), c, ""); err != nil {
					t.Fatalf("first Init: %v", err)
				}
				c.DeviceID = "fresh-2"
				return c
			},
			kind: ErrInvalid, code: CodeReplayed,
		},
		{
			name: "registered deviceId",
			challenge: func(t *testing.T, h *harness) *Challenge {
				return newTestAgent(t, "taken", "new key").registration(t, h.clock.Now())
			},
			kind: ErrAlreadyRegistered, code: CodeAlreadyRegistered,
		},
		{
			name: "registered public key",
			challenge: func(t *testing.T, h *harness) *Challenge {
				h.clock.Advance(time.Second) // else the same key signs the same message: a replay
				return newTestAgent(t, "new device", "taken").registration(t, h.clock.Now())
			},
			kind: ErrAlreadyRegistered, code: CodeAlreadyRegistered,
		},
		{
			name: "stale timestamp",
			challenge: func(t *testing.T, h *harness) *Challenge {
				return newTestAgent(t, "fresh", "fresh").registration(t, h.clock.Now().Add(-testMaxAge-time.Millisecond))
			},
			kind: ErrInvalid, code: CodeTimestampWindow,
		},
		{
			name: "bad signature",
			challenge: func(t *testing.T, h *harness) *Challenge {
				c := newTestAgent(t, "fresh", "fresh").registration(t, h.clock.Now())
				c.Signature = flipBit(c.Signature, 3)
				return c
			},
			kind: ErrInvalid, code: CodeSignatureMismatch,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.register(t, newTestAgent(t, "taken", "taken"), "owner")
			c := tt.challenge(t, h)
			s, err := h.reg.Init(context.Background(), c, "")
			if err == nil {
				t.Fatalf("Init accepted, session %+v", s)
			}
			wantError(t, err, tt.kind, tt.code, "")
		})
	}
}

func TestSessionExpires(t *testing.T) {
	h := newHarness(t)
	s := h.init(t, newTestAgent(t, "agent-1", "expire"))

	h.clock.Advance(testSessionTTL - time.Millisecond)
	if got := h.session(t, s.ID).Status; got != SessionPending {
		t.Fatalf("status 1ms before expiry = %s, want pending", got)
	}
	h.clock.Advance(time.Millisecond)
	if got := h.session(t, s.ID).Status; got != SessionExpired {
		t.Fatalf("status at expiresAt = %s, want expired", got)
	}
	h.clock.Advance(palm.Grace - time.Second)
	if got := h.session(t, s.ID).Status; got != SessionExpired {
		t.Fatalf("status within the grace after expiry = %s, want expired (still readable)", got)
	}

	c, err := h.reg.Challenge(context.Background(), s, false)
	if err != nil {
		t.Fatalf("Challenge: %v", err)
	}
	if c.Status != palm.StatusExpired {
		t.Errorf("palm challenge status = %s, want expired", c.Status)
	}
	if _, err := h.palm.DevScan(context.Background(), c.ID, c.Nonce, "late"); !errors.Is(err, palm.ErrExpired) {
		t.Errorf("DevScan after expiry: %v, want palm.ErrExpired", err)
	}
	if got := h.session(t, s.ID).Status; got != SessionExpired {
		t.Errorf("status after a late scan = %s, want expired", got)
	}
	if l := h.lookupDevice(t, "agent-1"); l.Registered {
		t.Error("expired session registered its agent")
	}
}

func TestSessionNotFound(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{"", "nope", "00000000-0000-0000-0000-000000000000", "urn:uuid:00000000-0000-0000-0000-000000000000"} {
		_, err := h.reg.Session(context.Background(), id)
		wantError(t, err, ErrSessionNotFound, CodeSessionNotFound, "")
	}
}

func TestCompleteRegistersAgent(t *testing.T) {
	h := newHarness(t)
	a := newTestAgent(t, "agent-1", "complete")
	s := h.init(t, a)
	h.clock.Advance(2 * time.Minute)
	completedAt := h.clock.Now()
	c := h.scan(t, s, "alice")
	if c.Status != palm.StatusVerified || c.HumanID == "" {
		t.Fatalf("palm challenge after scan = %+v", c)
	}

	got := h.session(t, s.ID)
	if got.Status != SessionCompleted || !sameTime(got.RegisteredAt, completedAt) {
		t.Errorf("session = %+v, want completed at %s", got, completedAt)
	}
	for name, l := range map[string]*Lookup{"device": h.lookupDevice(t, "agent-1"), "public key": h.lookupKey(t, a)} {
		if !l.Registered || !l.Verified || l.HumanID != c.HumanID || !sameTime(l.RegisteredAt, completedAt) {
			t.Errorf("lookup by %s = %+v, want registered to %s at %s", name, l, c.HumanID, completedAt)
		}
	}
	if _, err := h.palm.DevScan(context.Background(), c.ID, c.Nonce, "alice"); !errors.Is(err, palm.ErrNotPending) {
		t.Errorf("second scan: %v, want palm.ErrNotPending", err)
	}
	// Time passing does not expire a completed session.
	h.clock.Advance(testSessionTTL)
	if got := h.session(t, s.ID).Status; got != SessionCompleted {
		t.Errorf("status after expiresAt = %s, want completed", got)
	}
}

func TestLookupUnknown(t *testing.T) {
	h := newHarness(t)
	h.register(t, newTestAgent(t, "known", "known"), "alice")
	for name, l := range map[string]*Lookup{
		"device":     h.lookupDevice(t, "unknown"),
		"public key": h.lookupKey(t, newTestAgent(t, "", "unknown")),
	} {
		if l.Registered || l.Verified || l.HumanID != "" || !time.Time(l.RegisteredAt).IsZero() {
			t.Errorf("lookup by %s of an unknown agent = %+v", name, l)
		}
	}
	_, err := h.reg.LookupDevice(context.Background(), "bad\x00id")
	wantError(t, err, ErrInvalid, CodeInvalidField, "deviceId")
}

func TestVerifySignature(t *testing.T) {
	h := newHarness(t)
	a := newTestAgent(t, "agent-1", "verify")
	h.register(t, a, "alice")
	pending := newTestAgent(t, "pending", "pending")
	pendingSession := h.init(t, pending)
	other := newTestAgent(t, "agent-1", "impostor")
	tests := []struct {
		name                 string
		agent                *testAgent
		deviceID             string
		tamper               bool
		verified, registered bool
	}{
		{"registered agent", a, "agent-1", false, true, true},
		{"registered agent, bad signature", a, "agent-1", true, false, true},
		{"registered device, another key", other, "agent-1", false, true, false},
		{"registered key, another device", a, "agent-2", false, true, false},
		{"pending registration", pending, "pending", false, true, false},
		{"unknown agent", newTestAgent(t, "x", "unknown"), "x", false, true, false},
	}
	// The second pass answers registered keys from the remembered ones.
	for _, pass := range []string{"store", "remembered"} {
		for _, tt := range tests {
			t.Run(pass+"/"+tt.name, func(t *testing.T) {
				// Any message: no form or age rule applies.
				f := tt.agent.fields("hello, any message at all", 1)
				f["deviceId"] = tt.deviceID
				c, err := ParseChallenge(mustJSON(t, f))
				if err != nil {
					t.Fatalf("ParseChallenge: %v", err)
				}
				if tt.tamper {
					c.Message += "!"
				}
				got, err := h.reg.VerifySignature(context.Background(), c)
				if err != nil {
					t.Fatalf("VerifySignature: %v", err)
				}
				if got.Verified != tt.verified || got.Registered != tt.registered {
					t.Errorf("VerifySignature = %+v, want verified %v registered %v", got, tt.verified, tt.registered)
				}
			})
		}
	}
	// A key found unregistered is not remembered: once its registration
	// completes, it verifies as registered.
	h.scan(t, pendingSession, "bob")
	c, err := ParseChallenge(mustJSON(t, pending.fields("hello", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := h.reg.VerifySignature(context.Background(), c); err != nil || !got.Registered {
		t.Errorf("after completing the pending registration: VerifySignature = %+v, %v; want registered", got, err)
	}
}

func TestRegisteredKeysBounded(t *testing.T) {
	var r registeredKeys
	key := func(i int) ed25519.PublicKey {
		k := make(ed25519.PublicKey, ed25519.PublicKeySize)
		binary.BigEndian.PutUint64(k, uint64(i))
		return k
	}
	for i := range registeredKeysMax + 100 {
		r.put(key(i), fmt.Sprint("device-", i), 0)
	}
	if n := len(r.devices); n != registeredKeysMax {
		t.Errorf("%d keys remembered, want at most %d", n, registeredKeysMax)
	}
	last := registeredKeysMax + 99
	if d, ok := r.get(key(last)); !ok || d != fmt.Sprint("device-", last) {
		t.Errorf("get(last put) = %q, %v", d, ok)
	}
	if _, ok := r.get(ed25519.PublicKey("short")); ok {
		t.Error("get of a malformed key found something")
	}
}

func TestDenyFailsSession(t *testing.T) {
	h := newHarness(t)
	a := newTestAgent(t, "agent-1", "deny")
	s := h.init(t, a)
	h.deny(t, s)
	if got := h.session(t, s.ID); got.Status != SessionFailed || !time.Time(got.RegisteredAt).IsZero() {
		t.Errorf("session after deny = %+v, want failed", got)
	}
	c, err := h.reg.Challenge(context.Background(), s, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.palm.DevScan(context.Background(), c.ID, c.Nonce, "alice"); !errors.Is(err, palm.ErrNotPending) {
		t.Errorf("scan after deny: %v, want palm.ErrNotPending", err)
	}
	if l := h.lookupDevice(t, "agent-1"); l.Registered {
		t.Error("denied session registered its agent")
	}
	h.clock.Advance(testSessionTTL)
	if got := h.session(t, s.ID).Status; got != SessionFailed {
		t.Errorf("status after expiresAt = %s, want failed", got)
	}
}

func TestTwoSessionsForOneDevice(t *testing.T) {
	h := newHarness(t)
	first := newTestAgent(t, "agent-1", "first key")
	second := newTestAgent(t, "agent-1", "second key")
	s1 := h.init(t, first)
	h.clock.Advance(time.Second)
	s2 := h.init(t, second)

	h.scan(t, s1, "alice")
	h.scan(t, s2, "bob")
	if got := h.session(t, s1.ID).Status; got != SessionCompleted {
		t.Errorf("first session = %s, want completed", got)
	}
	if got := h.session(t, s2.ID); got.Status != SessionFailed || !time.Time(got.RegisteredAt).IsZero() {
		t.Errorf("second session = %+v, want failed", got)
	}
	if l := h.lookupKey(t, first); !l.Registered {
		t.Error("first key is not registered")
	}
	if l := h.lookupKey(t, second); l.Registered {
		t.Errorf("second key is registered: %+v", l)
	}
	board, err := h.reg.Leaderboard(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(board) != 1 || board[0].AgentCount != 1 {
		t.Errorf("leaderboard = %+v, want one human with one agent", board)
	}
}

func TestLeaderboard(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	// Humans "two-early" and "two-late" both end with two agents; the one with the
	// larger humanId registers first, so that earliest time, not humanId, decides.
	x, y := h.human(t, "pair-x"), h.human(t, "pair-y")
	early, late := "pair-x", "pair-y"
	if x < y {
		early, late = late, early
	}
	plan := []string{"three", early, "one", late, "three", early, late, "three"}
	earliest := map[string]time.Time{}
	humans := map[string]string{}
	for i, subject := range plan {
		h.clock.Advance(time.Second)
		if _, ok := earliest[subject]; !ok {
			earliest[subject] = h.clock.Now()
		}
		humans[subject] = h.register(t, newTestAgent(t, "agent-"+strconv.Itoa(i), "lb-"+strconv.Itoa(i)), subject)
	}
	if humans[early] <= humans[late] {
		t.Fatalf("setup: early human %s should sort after late human %s", humans[early], humans[late])
	}

	want := []struct {
		subject string
		count   int64
	}{{"three", 3}, {early, 2}, {late, 2}, {"one", 1}}
	board, err := h.reg.Leaderboard(ctx, 0)
	if err != nil {
		t.Fatalf("Leaderboard: %v", err)
	}
	if len(board) != len(want) {
		t.Fatalf("leaderboard has %d entries, want %d: %+v", len(board), len(want), board)
	}
	var sum int64
	for i, w := range want {
		e := board[i]
		sum += e.AgentCount
		if e.HumanID != humans[w.subject] || e.AgentCount != w.count || !sameTime(e.EarliestRegisteredAt, earliest[w.subject]) {
			t.Errorf("entry %d = {%s %d %s}, want {%s %d %s}", i, e.HumanID, e.AgentCount, e.EarliestRegisteredAt.Format(),
				humans[w.subject], w.count, earliest[w.subject].Format("2006-01-02T15:04:05.000Z"))
		}
	}
	if sum != int64(len(plan)) {
		t.Errorf("agentCount sums to %d, want %d agents", sum, len(plan))
	}

	for _, limit := range []int{1, 2, 3, 4, 5, MaxLeaderboardLimit, MaxLeaderboardLimit + 1, -1} {
		got, err := h.reg.Leaderboard(ctx, limit)
		if err != nil {
			t.Fatalf("Leaderboard(%d): %v", limit, err)
		}
		n := len(board)
		if limit > 0 && limit < n {
			n = limit
		}
		if !slices.EqualFunc(got, board[:n], func(a, b LeaderboardEntry) bool {
			return a.HumanID == b.HumanID && a.AgentCount == b.AgentCount
		}) {
			t.Errorf("Leaderboard(%d) = %+v, want the first %d of %+v", limit, got, n, board)
		}
	}
}

func TestLeaderboardTieBreaksOnHumanID(t *testing.T) {
	h := newHarness(t)
	var ids []string
	for i, subject := range []string{"p", "q", "r"} {
		// Same instant for all three: count and earliest tie.
		ids = append(ids, h.register(t, newTestAgent(t, "tie-"+subject, "tie-"+strconv.Itoa(i)), subject))
	}
	slices.Sort(ids)
	board, err := h.reg.Leaderboard(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range board {
		got = append(got, e.HumanID)
	}
	if !slices.Equal(got, ids) {
		t.Errorf("leaderboard order = %v, want humanId order %v", got, ids)
	}
}

func TestPalmSubjectNeverStored(t *testing.T) {
	h := newHarness(t)
	const subject = "alice-secret-palm"
	h.human(t, subject)
	h.register(t, newTestAgent(t, "agent-1", "secret-1"), subject)
	h.register(t, newTestAgent(t, "agent-2", "secret-2"), subject)
	h.deny(t, h.init(t, newTestAgent(t, "agent-3", "secret-3")))

	var n int
	err := h.store.View(context.Background(), func(txn storage.Txn) error {
		return txn.Iterate([]byte(""), func(key, value []byte) (bool, error) {
			n++
			for what, b := range map[string][]byte{"key": key, "value": value} {
				if bytes.Contains(bytes.ToLower(b), []byte(subject)) {
					t.Errorf("%s of record %q holds the palm subject: %q", what, key, b)
				}
			}
			if strings.HasPrefix(string(key), "palm/h/") && bytes.Contains(key, []byte("alice")) {
				t.Errorf("human key %q names the subject", key)
			}
			return true, nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Errorf("iterated %d records, want the whole store (sessions, challenges, agents, humans, index)", n)
	}
}

// TestPendingCapUnderConcurrency: concurrent Inits of one device never leave more
// than MaxPendingSessions pending sessions.
func TestPendingCapUnderConcurrency(t *testing.T) {
	h := newHarness(t)
	a := newTestAgent(t, "busy-agent", "busy")
	const inits = 3 * MaxPendingSessions
	var created, capped atomic.Int64
	var wg sync.WaitGroup
	for i := range inits {
		c := a.registration(t, h.clock.Now().Add(time.Duration(i)*time.Millisecond))
		wg.Go(func() {
			_, err := h.reg.Init(context.Background(), c, "")
			switch {
			case err == nil:
				created.Add(1)
			case errors.Is(err, ErrTooManyPending):
				capped.Add(1)
			default:
				t.Errorf("Init: %v", err)
			}
		})
	}
	wg.Wait()
	if created.Load() != MaxPendingSessions || capped.Load() != inits-MaxPendingSessions {
		t.Errorf("%d sessions created and %d refused, want %d and %d", created.Load(), capped.Load(), MaxPendingSessions, inits-MaxPendingSessions)
	}
}

// TestLookupKeyIndexWithoutRecord: a key index entry written before the index kept
// a copy of the record (the deviceId alone) still answers lookups and signature
// checks, through the device record.
func TestLookupKeyIndexWithoutRecord(t *testing.T) {
	h := newHarness(t)
	a := newTestAgent(t, "old-agent", "old")
	human := h.register(t, a, "alice")
	want := h.lookupKey(t, a)
	if !want.Registered || want.HumanID != human {
		t.Fatalf("lookup by key = %+v, want registered to %s", want, human)
	}
	if err := h.store.Update(context.Background(), func(txn storage.Txn) error {
		return txn.Set(publicKeyKey(a.pub), []byte(a.deviceID), 0)
	}); err != nil {
		t.Fatal(err)
	}
	if got := h.lookupKey(t, a); *got != *want {
		t.Errorf("lookup by an old-format key entry = %+v, want %+v", got, want)
	}
	c, err := ParseChallenge(mustJSON(t, a.fields("hello", 1)))
	if err != nil {
		t.Fatal(err)
	}
	h.reg.registeredKeys = registeredKeys{} // read the entry, not the remembered key
	if got, err := h.reg.VerifySignature(context.Background(), c); err != nil || !got.Registered {
		t.Errorf("VerifySignature with an old-format key entry = %+v, %v; want registered", got, err)
	}
}
