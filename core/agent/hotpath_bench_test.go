package agent

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/storage/memstore"
)

// BenchmarkKnownKey measures the hot path of POST /v1/agent/verify/signature and
// the lookups for an agent this instance has seen (answered from its caches,
// with no store read), on the real clock: what the removal generation's check
// adds to a known key's request.
func BenchmarkKnownKey(b *testing.B) {
	ctx := context.Background()
	store := memstore.New()
	p, err := palm.NewService(palm.Config{Store: store, Issuer: testIssuer, Dev: true})
	if err != nil {
		b.Fatal(err)
	}
	reg := NewService(Config{Store: store, Palm: p, Issuer: testIssuer, SessionTTL: time.Minute, ChallengeMaxAge: time.Minute})
	seed := sha256.Sum256([]byte("bench known key"))
	priv := ed25519.NewKeyFromSeed(seed[:])
	pub := priv.Public().(ed25519.PublicKey)
	body := func(msg string, ts int64) []byte {
		j, _ := json.Marshal(map[string]any{
			"deviceId": "bench-known", "publicKey": EncodePublicKey(pub), "message": msg, "timestamp": ts,
			"signature": base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte(msg))),
		})
		return j
	}
	ts := time.Now().UnixMilli()
	init, err := ParseChallenge(body(fmt.Sprintf("agent-register-%d", ts), ts))
	if err != nil {
		b.Fatal(err)
	}
	session, err := reg.Init(ctx, init, "")
	if err != nil {
		b.Fatal(err)
	}
	c, err := reg.Challenge(ctx, session, true)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := p.DevScan(ctx, c.ID, c.Nonce, "bench"); err != nil {
		b.Fatal(err)
	}
	check, err := ParseChallenge(body("hello", ts))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("VerifySignature", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if got, err := reg.VerifySignature(ctx, check); err != nil || !got.Registered {
				b.Fatal(got, err)
			}
		}
	})
	b.Run("LookupDevice", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if got, err := reg.LookupDevice(ctx, "bench-known"); err != nil || !got.Registered {
				b.Fatal(got, err)
			}
		}
	})
	b.Run("LookupPublicKey", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if got, err := reg.LookupPublicKey(ctx, pub); err != nil || !got.Registered {
				b.Fatal(got, err)
			}
		}
	})
}
