package bench

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/internal/loadgen"
	"github.com/palmgate/palmgate/storage/badgerstore"
)

// BenchmarkCaddy measures requests through one Caddy, started once for all its
// sub-benchmarks (a top-level benchmark function runs again for each b.N; a
// parent of sub-benchmarks runs once): 32 keep-alive connections, each
// goroutine of RunParallel owning one (loadgen.ParallelRequests). ns/op is the
// inverse of the throughput; req/s is reported too. For the interleaved rounds,
// latencies and ratios, use the load script (TestLoad, make bench).
func BenchmarkCaddy(b *testing.B) {
	s := startSite(b, 1)
	host := strings.TrimPrefix(s.URL, "http://")
	for _, c := range []struct{ name, path string }{
		{"BareProxy", "/bare/x"},
		{"BearerCached", "/cached/x"},
		{"BearerUncached", "/uncached/x"},
		{"Check", "/oauth2/check?scope=openid"},
	} {
		req := getRequest(host, c.path, s.token)
		b.Run(c.name, func(b *testing.B) { loadgen.ParallelRequests(b, host, [][]byte{req}, 32) })
	}
}

// BenchmarkVerify measures bearer.Verifier.Verify alone, in core terms: a real key
// set in a Badger store, an ES256 access token as palmgate signs it, and the
// verified-token cache on (a reused token: a SHA-256 and a map lookup) or off (a
// signature check and the JWT parsing on every call).
func BenchmarkVerify(b *testing.B) {
	ctx := context.Background()
	store, err := badgerstore.Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	set, err := keys.Open(ctx, store, nil)
	if err != nil {
		b.Fatal(err)
	}
	const issuer = "https://id.example/oauth2"
	now := time.Now()
	token, err := set.Sign(keys.ES256, bearer.TokenType, bearer.Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: issuer, Subject: strings.Repeat("s", 43), Audience: jwt.ClaimStrings{"https://id.example"},
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)),
			ID: "0b6f5a3e-8f0e-4b8e-9a51-1c6c2f0c3d4e",
		},
		ClientID: "bench", Scope: "openid offline_access", AuthTime: now.Unix(), GrantID: "5d0c9f6e-2b7a-4a57-8d7e-3f1b2c4d5e6f",
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		size int
	}{{"Cached", 0}, {"Uncached", -1}} {
		v := bearer.NewVerifier(bearer.Config{Issuer: issuer, Algorithm: keys.ES256, Keys: set, CacheSize: c.size})
		if _, err := v.Verify(ctx, token); err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(ctx, token); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"Parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := v.Verify(ctx, token); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkSignature splits the cost of an uncached Verify: the ES256 signature
// check alone (crypto/ecdsa, P-256), the JWT parsing alone (golang-jwt, without
// verification), and for comparison the Ed25519 signature check an EdDSA access
// token would cost instead.
func BenchmarkSignature(b *testing.B) {
	msg := sha256.Sum256([]byte(strings.Repeat("header.payload", 40)))
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	sig, err := ecdsa.SignASN1(rand.Reader, ec, msg[:])
	if err != nil {
		b.Fatal(err)
	}
	b.Run("ES256Verify", func(b *testing.B) {
		for b.Loop() {
			if !ecdsa.VerifyASN1(&ec.PublicKey, msg[:], sig) {
				b.Fatal("bad signature")
			}
		}
	})
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	edMsg := []byte(strings.Repeat("header.payload", 40))
	edSig := ed25519.Sign(priv, edMsg)
	b.Run("EdDSAVerify", func(b *testing.B) {
		for b.Loop() {
			if !ed25519.Verify(pub, edMsg, edSig) {
				b.Fatal("bad signature")
			}
		}
	})
	now := time.Now()
	token, err := jwt.NewWithClaims(jwt.SigningMethodES256, bearer.Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: "https://id.example/oauth2", Subject: strings.Repeat("s", 43), Audience: jwt.ClaimStrings{"https://id.example"},
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)), ID: "0b6f5a3e-8f0e-4b8e-9a51-1c6c2f0c3d4e",
		},
		ClientID: "bench", Scope: "openid offline_access", AuthTime: now.Unix(), GrantID: "5d0c9f6e-2b7a-4a57-8d7e-3f1b2c4d5e6f",
	}).SignedString(ec)
	if err != nil {
		b.Fatal(err)
	}
	parser := jwt.NewParser()
	b.Run("JWTParseOnly", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := parser.ParseUnverified(token, &bearer.Claims{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
