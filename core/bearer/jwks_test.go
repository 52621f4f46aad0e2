package bearer

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"testing"

	"github.com/palmgate/palmgate/internal/keystest"
)

// TestParseJWK: the keys a remote issuer's JWKS may hold, and those it may not.
func TestParseJWK(t *testing.T) {
	b64 := base64.RawURLEncoding.EncodeToString
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ec384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	edPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaKeys, err := keystest.RSAKeys()
	if err != nil {
		t.Fatal(err)
	}
	rk := rsaKeys[0]
	coord := func(n *big.Int, size int) string { return b64(n.FillBytes(make([]byte, size))) }
	ecJWK := map[string]any{"kty": "EC", "crv": "P-256", "kid": "ec", "x": coord(ec.X, 32), "y": coord(ec.Y, 32)}
	rsaJWK := map[string]any{"kty": "RSA", "kid": "rsa", "alg": "RS256", "n": b64(rk.N.Bytes()), "e": "AQAB"}
	edJWK := map[string]any{"kty": "OKP", "crv": "Ed25519", "kid": "ed", "x": b64(edPub)}
	with := func(base map[string]any, kv ...any) map[string]any {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
			} else {
				m[kv[i].(string)] = kv[i+1]
			}
		}
		return m
	}
	// A 1024-bit modulus written with leading zero bytes to 256 bytes.
	small := new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), 1023), big.NewInt(1))
	offCurve := new(big.Int).Add(ec.Y, big.NewInt(1))

	for _, tc := range []struct {
		name    string
		jwk     map[string]any
		wantAlg string // "" when refused
	}{
		{"EC P-256, alg implied", ecJWK, "ES256"},
		{"EC P-256, use sig", with(ecJWK, "use", "sig", "alg", "ES256"), "ES256"},
		{"OKP Ed25519, alg implied", edJWK, "EdDSA"},
		{"RSA 2048 with alg", rsaJWK, "RS256"},
		{"RSA without alg", with(rsaJWK, "alg", nil), ""},
		{"RSA 1024 padded with zero bytes to 2048 bits' length", with(rsaJWK, "n", b64(small.FillBytes(make([]byte, 256)))), ""},
		{"RSA e of 5 bytes", with(rsaJWK, "e", b64([]byte{1, 0, 0, 0, 3})), ""},
		{"RSA e = 1", with(rsaJWK, "e", "AQ"), ""},
		{"an encryption key", with(ecJWK, "use", "enc"), ""},
		{"EC P-384", with(ecJWK, "crv", "P-384", "x", coord(ec384.X, 48), "y", coord(ec384.Y, 48)), ""},
		{"EC point off the curve", with(ecJWK, "y", coord(offCurve, 32)), ""},
		{"EC x of 31 bytes", with(ecJWK, "x", b64(make([]byte, 31))), ""},
		{"EC with its private d", with(ecJWK, "d", b64(ecPrivateBytes(t, ec))), ""},
		{"OKP X25519", with(edJWK, "crv", "X25519"), ""},
		{"OKP of 31 bytes", with(edJWK, "x", b64(edPub[:31])), ""},
		{"a symmetric key", map[string]any{"kty": "oct", "kid": "hs", "k": b64(make([]byte, 32))}, ""},
		{"no kty", with(ecJWK, "kty", nil), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := json.Marshal(tc.jwk)
			if err != nil {
				t.Fatal(err)
			}
			kid, k, err := parseJWK(raw)
			if tc.wantAlg == "" {
				if err == nil {
					t.Fatalf("parseJWK(%s) = %q %T %s, want an error", raw, kid, k.key, k.alg)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseJWK(%s): %v", raw, err)
			}
			if kid != tc.jwk["kid"] || k.alg != tc.wantAlg {
				t.Errorf("kid %q alg %q, want %q %q", kid, k.alg, tc.jwk["kid"], tc.wantAlg)
			}
			var want interface{ Equal(x crypto.PublicKey) bool }
			switch tc.wantAlg {
			case "ES256":
				want = &ec.PublicKey
			case "EdDSA":
				want = edPub
			case "RS256":
				want = &rk.PublicKey
			}
			if !want.Equal(k.key) {
				t.Errorf("parsed key %T differs from the published one", k.key)
			}
		})
	}
}

// ecPrivateBytes is the private scalar of k, 32 bytes for P-256.
func ecPrivateBytes(t *testing.T, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	d, err := k.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
