package service

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/core/agent"
	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/storage/badgerstore"
)

// TestSeedLayout seeds a small store and reads it back with core/agent itself:
// the leaderboard, lookups and signature checks see the seeded agents, and a
// registration through core/agent and core/palm (a real assertion of the bench
// attestor for a seeded human) updates that human's record and leaderboard
// entry in place, which it can only do if Seed wrote them exactly as core does
// (a mismatch would leave a stale leaderboard key: a duplicate entry).
func TestSeedLayout(t *testing.T) {
	ctx := context.Background()
	cfg := SeedConfig{Humans: 50, Agents: 600}
	dir := filepath.Join(t.TempDir(), "palmgate")
	if err := Seed(ctx, dir, cfg, nil); err != nil {
		t.Fatal(err)
	}
	store, err := badgerstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	const issuer = "https://id.example.test"
	engPub, engKey, _ := ed25519.GenerateKey(rand.Reader)
	ps, err := palm.NewService(palm.Config{Store: store, Issuer: issuer, Attestors: []palm.Attestor{{Name: AttestorName, Key: engPub}}})
	if err != nil {
		t.Fatal(err)
	}
	as := agent.NewService(agent.Config{Store: store, Palm: ps, Issuer: issuer, SessionTTL: 15 * time.Minute, ChallengeMaxAge: 5 * time.Minute})
	owners := cfg.Owners()

	board := func() []Entry {
		t.Helper()
		got, err := as.Leaderboard(ctx, agent.MaxLeaderboardLimit)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(got)
		var es []Entry
		json.Unmarshal(b, &es)
		return es
	}
	want := cfg.Leaderboard(owners, agent.MaxLeaderboardLimit)
	got := board()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("leaderboard:\n got %v\nwant %v", got, want)
	}
	for _, i := range []int{0, 49, 50, 333, 599} {
		pub := AgentKey(i).Public().(ed25519.PublicKey)
		for _, l := range []func() (*agent.Lookup, error){
			func() (*agent.Lookup, error) { return as.LookupDevice(ctx, DeviceID(i)) },
			func() (*agent.Lookup, error) { return as.LookupPublicKey(ctx, pub) },
		} {
			got, err := l()
			if err != nil || !got.Registered || got.HumanID != HumanID(int(owners[i])) ||
				got.RegisteredAt.Format() != agent.Time(RegisteredAt(i)).Format() {
				t.Fatalf("lookup of agent %d: %+v %v", i, got, err)
			}
		}
	}
	reg, unreg := verifyBodies(cfg, owners, 3, 3, 0)
	for k, body := range append(reg, unreg...) {
		c, err := agent.ParseChallenge(body)
		if err != nil {
			t.Fatal(err)
		}
		check, err := as.VerifySignature(ctx, c)
		if err != nil || !check.Verified || check.Registered != (k < len(reg)) {
			t.Fatalf("VerifySignature of body %d: %+v %v", k, check, err)
		}
	}

	// Register one more agent for the human ranked 3rd: its count grows by one,
	// its earliest registration stays, and it stays listed once.
	third := got[2]
	j := -1
	for h := range cfg.Humans {
		if HumanID(h) == third.HumanID {
			j = h
		}
	}
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(pub)
	ms := time.Now().UnixMilli()
	msg := fmt.Sprintf("layout-register-%d", ms)
	body, _ := json.Marshal(map[string]any{"deviceId": "layout-check", "publicKey": base64.StdEncoding.EncodeToString(der),
		"message": msg, "signature": base64.StdEncoding.EncodeToString(ed25519.Sign(key, []byte(msg))), "timestamp": ms})
	c, err := agent.ParseChallenge(body)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := as.Init(ctx, c, "")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := as.Challenge(ctx, sess, false)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	assertion, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, palm.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: AttestorName, Subject: PalmSubject(j), Audience: jwt.ClaimStrings{issuer},
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Minute))},
		Challenge: pc.ID, Nonce: pc.Nonce,
	}).SignedString(engKey)
	if err != nil {
		t.Fatal(err)
	}
	done, err := ps.Complete(ctx, pc.ID, assertion)
	if err != nil || done.HumanID != third.HumanID {
		t.Fatalf("Complete: %+v %v, want human %s (seeded human %d)", done, err, third.HumanID, j)
	}
	after := board()
	if len(after) != len(got) {
		t.Fatalf("leaderboard has %d entries after the registration, want %d: %v", len(after), len(got), after)
	}
	found := false
	for _, e := range after {
		if e.HumanID == third.HumanID {
			found = true
			if e.AgentCount != third.AgentCount+1 || e.EarliestRegisteredAt != third.EarliestRegisteredAt {
				t.Errorf("after the registration: %+v, want count %d and earliest %s", e, third.AgentCount+1, third.EarliestRegisteredAt)
			}
		}
	}
	if !found {
		t.Errorf("human %s left the leaderboard", third.HumanID)
	}
}
