package keys

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"math/big"
	"strings"
	"testing"
)

// orderP256 is n, the order of P-256 (SEC 2, section 2.4.2), written out here so
// that the test does not share the code's constant.
var orderP256, _ = new(big.Int).SetString("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551", 16)

// TestSignLowS: every ES256 token palmgate signs has s <= n/2. crypto/ecdsa
// returns a high s about half the time, so 64 tokens all low by chance is 2^-64.
func TestSignLowS(t *testing.T) {
	s := openSet(t, openStore(t, t.TempDir()))
	half := new(big.Int).Rsh(orderP256, 1)
	pub := s.Active(ES256).Public()
	for i := range 64 {
		token, err := s.Sign(ES256, "at+jwt", testClaims())
		if err != nil {
			t.Fatal(err)
		}
		parse(t, token, ES256, pub) // and it verifies
		sig, err := base64.RawURLEncoding.DecodeString(token[strings.LastIndexByte(token, '.')+1:])
		if err != nil || len(sig) != 64 {
			t.Fatalf("token %d: signature segment: %v, %d bytes", i, err, len(sig))
		}
		if sv := new(big.Int).SetBytes(sig[32:]); sv.Cmp(half) > 0 {
			t.Fatalf("token %d has a high s: %x", i, sv)
		}
	}
}

func TestLowSAndNormalizeS(t *testing.T) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256([]byte("message"))
	r, sv, err := ecdsa.Sign(rand.Reader, priv, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	raw := func(r, s *big.Int) []byte {
		b := make([]byte, 64)
		r.FillBytes(b[:32])
		s.FillBytes(b[32:])
		return b
	}
	half := new(big.Int).Rsh(orderP256, 1)
	low, high := new(big.Int).Set(sv), new(big.Int).Sub(orderP256, sv)
	if low.Cmp(half) > 0 {
		low, high = high, low
	}
	tests := []struct {
		name       string
		sig        []byte
		lowS       bool
		normalized []byte
	}{
		{"low s", raw(r, low), true, raw(r, low)},
		{"high s", raw(r, high), false, raw(r, low)},
		{"s = (n-1)/2", raw(r, half), true, raw(r, half)},
		{"s = (n+1)/2", raw(r, new(big.Int).Add(half, big.NewInt(1))), false, raw(r, half)},
		{"s = 0", raw(r, big.NewInt(0)), false, raw(r, big.NewInt(0))},
		{"s = n", raw(r, orderP256), false, raw(r, orderP256)},
		{"short", raw(r, low)[:63], false, raw(r, low)[:63]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := LowS(tt.sig); got != tt.lowS {
				t.Errorf("LowS = %v, want %v", got, tt.lowS)
			}
			if got := NormalizeS(tt.sig); !bytes.Equal(got, tt.normalized) {
				t.Errorf("NormalizeS = %x, want %x", got, tt.normalized)
			}
		})
	}
	// Both forms verify: that is the malleability.
	for _, s := range []*big.Int{low, high} {
		if !ecdsa.Verify(&priv.PublicKey, digest[:], r, s) {
			t.Fatalf("s = %x does not verify", s)
		}
	}
}
