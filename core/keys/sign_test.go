package keys

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/internal/keystest"
	"github.com/palmgate/palmgate/storage"
)

// parse verifies token with pub, pinning alg, and returns its header.
func parse(t *testing.T, token, alg string, pub crypto.PublicKey) (map[string]any, *jwt.RegisteredClaims) {
	t.Helper()
	var claims jwt.RegisteredClaims
	tok, err := jwt.NewParser(jwt.WithValidMethods([]string{alg}), jwt.WithTimeFunc(fixedClock)).
		ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return pub, nil })
	if err != nil {
		t.Fatalf("verifying %s token: %v", alg, err)
	}
	return tok.Header, &claims
}

func testClaims() jwt.RegisteredClaims {
	return jwt.RegisteredClaims{
		Issuer: "https://id.example.test/oauth2", Subject: "someone",
		IssuedAt: jwt.NewNumericDate(testNow), ExpiresAt: jwt.NewNumericDate(testNow.Add(time.Hour)),
	}
}

func TestSign(t *testing.T) {
	s := openSet(t, openStore(t, t.TempDir()))
	tests := []struct {
		name, alg, typ string
	}{
		{"access token", ES256, "at+jwt"},
		{"refresh token", ES256, "rt+jwt"},
		{"ID token", RS256, "JWT"},
		{"ID token, ES256", ES256, "JWT"},
		{"ID token, EdDSA", EdDSA, "JWT"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			token, err := s.Sign(tc.alg, tc.typ, testClaims())
			if err != nil {
				t.Fatalf("Sign: %v", err)
			}
			k := s.Active(tc.alg)
			header, claims := parse(t, token, tc.alg, k.Public())
			if header["kid"] != k.ID || header["typ"] != tc.typ || header["alg"] != tc.alg {
				t.Errorf("header = %v, want kid %s, typ %s, alg %s", header, k.ID, tc.typ, tc.alg)
			}
			if claims.Subject != "someone" || claims.Issuer != "https://id.example.test/oauth2" {
				t.Errorf("claims = %+v", claims)
			}
			// The other algorithms' keys do not verify it.
			for _, alg := range Algorithms {
				if other := s.Active(alg); alg != tc.alg {
					if _, err := jwt.Parse(token, func(*jwt.Token) (any, error) { return other.Public(), nil }); err == nil {
						t.Errorf("token verifies with the %s key", alg)
					}
				}
			}
		})
	}
	for _, alg := range []string{"HS256", "none", "ES384", "Ed25519", ""} {
		t.Run("no key for "+alg, func(t *testing.T) {
			if token, err := s.Sign(alg, "JWT", testClaims()); err == nil {
				t.Errorf("Sign(%q) = %q, want an error", alg, token)
			}
		})
	}
}

func TestRotate(t *testing.T) {
	for _, tc := range algorithms {
		t.Run(tc.alg, func(t *testing.T) {
			store := openStore(t, t.TempDir())
			s := openSet(t, store)
			old := s.Active(tc.alg)
			otherAlg := map[string]string{RS256: ES256, ES256: EdDSA, EdDSA: RS256}[tc.alg]
			otherKID := s.Active(otherAlg).ID
			before, err := s.Sign(tc.alg, "JWT", testClaims())
			if err != nil {
				t.Fatalf("Sign: %v", err)
			}

			rotated, err := s.Rotate(context.Background(), tc.alg)
			if err != nil {
				t.Fatalf("Rotate: %v", err)
			}
			tc.check(t, rotated.Private)
			if rotated.ID == old.ID {
				t.Fatal("Rotate kept the kid")
			}
			if got := s.Active(tc.alg); got == nil || got.ID != rotated.ID {
				t.Errorf("Active = %v, want %s", got, rotated.ID)
			}
			if got := s.ByID(old.ID); got == nil || got.Active {
				t.Errorf("ByID(old) = %+v, want the old key, inactive", got)
			}
			if got := s.Active(otherAlg); got == nil || got.ID != otherKID {
				t.Errorf("rotating %s changed the %s key", tc.alg, otherAlg)
			}
			if got := storedActive(t, store, tc.alg); len(got) != 1 || got[0] != rotated.ID {
				t.Errorf("stored active keys = %v, want [%s]", got, rotated.ID)
			}

			jwks := s.JWKS()
			var kids []string
			for _, j := range jwks {
				kids = append(kids, j.KeyID)
			}
			if len(jwks) != 4 || !slices.Contains(kids, old.ID) || !slices.Contains(kids, rotated.ID) {
				t.Errorf("JWKS kids = %v, want 4 keys including %s and %s", kids, old.ID, rotated.ID)
			}
			if len(jwks) == 4 && (jwks[3].KeyID != old.ID) {
				t.Errorf("JWKS order = %v, want the inactive %s last", kids, old.ID)
			}

			// Tokens signed before the rotation verify with the old key, found by kid;
			// new ones carry the new kid.
			header, _ := parse(t, before, tc.alg, s.ByID(old.ID).Public())
			if header["kid"] != old.ID {
				t.Errorf("old token kid = %v", header["kid"])
			}
			after, err := s.Sign(tc.alg, "JWT", testClaims())
			if err != nil {
				t.Fatalf("Sign after Rotate: %v", err)
			}
			if header, _ := parse(t, after, tc.alg, rotated.Public()); header["kid"] != rotated.ID {
				t.Errorf("new token kid = %v, want %s", header["kid"], rotated.ID)
			}

			// Another instance sees the rotation on Open.
			other := openSet(t, store)
			if got := other.Active(tc.alg); got == nil || got.ID != rotated.ID || other.ByID(old.ID) == nil {
				t.Errorf("another instance: active %v, old known %v", got, other.ByID(old.ID) != nil)
			}
		})
	}
	t.Run("unsupported algorithm", func(t *testing.T) {
		s := openSet(t, openStore(t, t.TempDir()))
		if _, err := s.Rotate(context.Background(), "HS256"); err == nil {
			t.Error("Rotate(HS256) succeeded")
		}
	})
}

// publicKeyOf rebuilds a public key from the fields of its JWK, as a relying party
// does.
func publicKeyOf(t *testing.T, j map[string]string) crypto.PublicKey {
	t.Helper()
	b64 := func(field string) []byte {
		b, err := base64.RawURLEncoding.DecodeString(j[field])
		if err != nil || j[field] == "" {
			t.Fatalf("JWK %s %s = %q is not base64url without padding: %v", j["kid"], field, j[field], err)
		}
		return b
	}
	switch j["kty"] {
	case "RSA":
		n, e := b64("n"), b64("e")
		if n[0] == 0 || e[0] == 0 {
			t.Errorf("JWK %s: n or e has a leading zero byte", j["kid"])
		}
		return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
	case "EC":
		if j["crv"] != "P-256" {
			t.Fatalf("JWK %s crv = %q", j["kid"], j["crv"])
		}
		x, y := b64("x"), b64("y")
		if len(x) != 32 || len(y) != 32 {
			t.Fatalf("JWK %s: x is %d bytes, y %d, want 32 each", j["kid"], len(x), len(y))
		}
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
		if err != nil {
			t.Fatalf("JWK %s is not a P-256 point: %v", j["kid"], err)
		}
		return pub
	case "OKP":
		if j["crv"] != "Ed25519" {
			t.Fatalf("JWK %s crv = %q", j["kid"], j["crv"])
		}
		if x := b64("x"); len(x) == ed25519.PublicKeySize {
			return ed25519.PublicKey(x)
		}
		t.Fatalf("JWK %s: x is not %d bytes", j["kid"], ed25519.PublicKeySize)
	}
	t.Fatalf("JWK %s kty = %q", j["kid"], j["kty"])
	return nil
}

func TestJWKS(t *testing.T) {
	s := openSet(t, openStore(t, t.TempDir()))
	// Publish as JSON, then read back as a relying party would.
	raw, err := json.Marshal(map[string]any{"keys": s.JWKS()})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Keys []map[string]string `json:"keys"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("JWKS JSON %s: %v", raw, err)
	}
	byKID := map[string]map[string]string{}
	for _, j := range doc.Keys {
		byKID[j["kid"]] = j
	}

	tests := []struct {
		alg, kty string
		want     []string // fields present
		absent   []string
	}{
		{RS256, "RSA", []string{"kty", "use", "alg", "kid", "n", "e"}, []string{"crv", "x", "y"}},
		{ES256, "EC", []string{"kty", "use", "alg", "kid", "crv", "x", "y"}, []string{"n", "e"}},
		{EdDSA, "OKP", []string{"kty", "use", "alg", "kid", "crv", "x"}, []string{"n", "e", "y"}},
	}
	for _, tc := range tests {
		t.Run(tc.alg, func(t *testing.T) {
			k := s.Active(tc.alg)
			j := byKID[k.ID]
			if j == nil {
				t.Fatalf("JWKS %s lacks the active %s key %s", raw, tc.alg, k.ID)
			}
			if j["kty"] != tc.kty || j["use"] != "sig" || j["alg"] != tc.alg {
				t.Errorf("JWK = %v", j)
			}
			for _, f := range tc.want {
				if j[f] == "" {
					t.Errorf("JWK lacks %s: %v", f, j)
				}
			}
			for _, f := range tc.absent {
				if _, ok := j[f]; ok {
					t.Errorf("JWK has %s: %v", f, j)
				}
			}
			pub := publicKeyOf(t, j)
			if !pub.(interface{ Equal(crypto.PublicKey) bool }).Equal(k.Public()) {
				t.Error("the key rebuilt from the JWK differs from the signing key")
			}
			if rk, ok := pub.(*rsa.PublicKey); ok && (rk.E != 65537 || j["e"] != "AQAB") {
				t.Errorf("RSA e = %d (%q), want 65537 (AQAB)", rk.E, j["e"])
			}
			token, err := s.Sign(tc.alg, "JWT", testClaims())
			if err != nil {
				t.Fatalf("Sign: %v", err)
			}
			if header, _ := parse(t, token, tc.alg, pub); header["kid"] != j["kid"] {
				t.Errorf("token kid %v, JWK kid %s", header["kid"], j["kid"])
			}
		})
	}
}

// TestJWKCoordinatePadding checks that EC coordinates with leading zero bytes are
// still 32 bytes long, as RFC 7518 6.2.1.2 requires (one key in 256 has such an x).
func TestJWKCoordinatePadding(t *testing.T) {
	var priv *ecdsa.PrivateKey
	for i := 0; ; i++ {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := k.PublicKey.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if der[1] == 0 { // x starts with a zero byte
			priv = k
			break
		}
		if i > 100000 {
			t.Fatal("no key with a short x found")
		}
	}
	kid, err := thumbprintID(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	j := jwkOf(&Key{ID: kid, Algorithm: ES256, Private: priv, Active: true})
	b, _ := json.Marshal(j)
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	pub := publicKeyOf(t, m)
	if !pub.(*ecdsa.PublicKey).Equal(priv.Public()) {
		t.Error("rebuilt key differs")
	}
	raw, _ := base64.RawURLEncoding.DecodeString(m["x"])
	if !bytes.HasPrefix(raw, []byte{0}) {
		t.Errorf("x = %x, want its leading zero kept", raw)
	}
}

// TestKeyIDIsThumbprint: a new key's kid is its RFC 7638 JWK thumbprint (SHA-256),
// as a relying party computes it from the published JWK; a key stored under an
// older kid keeps it.
func TestKeyIDIsThumbprint(t *testing.T) {
	// RFC 8037 A.3: the thumbprint of its example Ed25519 key.
	x, _ := base64.RawURLEncoding.DecodeString("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
	if kid, err := thumbprintID(ed25519.PublicKey(x)); err != nil || kid != "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k" {
		t.Errorf("thumbprintID(RFC 8037 A.3 key) = %q, %v; want kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k", kid, err)
	}

	store := openStore(t, t.TempDir())
	s := openSet(t, store)
	raw, err := json.Marshal(map[string]any{"keys": s.JWKS()})
	if err != nil {
		t.Fatal(err)
	}
	var published jose.JSONWebKeySet
	if err := json.Unmarshal(raw, &published); err != nil {
		t.Fatalf("JWKS %s: %v", raw, err)
	}
	if len(published.Keys) != len(Algorithms) {
		t.Fatalf("JWKS has %d keys, want %d", len(published.Keys), len(Algorithms))
	}
	for _, j := range published.Keys {
		sum, err := j.Thumbprint(crypto.SHA256)
		if err != nil {
			t.Fatalf("thumbprint of %s: %v", j.KeyID, err)
		}
		if want := base64.RawURLEncoding.EncodeToString(sum); j.KeyID != want {
			t.Errorf("%s key's kid = %q, want its JWK thumbprint %q", j.Algorithm, j.KeyID, want)
		}
	}

	// A record written by an earlier version, under its truncated-DER-hash kid.
	old, err := newKey(keystest.Generator, ES256, fixedClock)
	if err != nil {
		t.Fatal(err)
	}
	old.ID, old.Active = "q5wD0x3dT1d2aVf4", false
	rec, err := old.record()
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Update(context.Background(), func(txn storage.Txn) error { return txn.Set(keyKey(ES256, old.ID), rec, 0) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if k := s.ByID(old.ID); k == nil || !k.Private.Public().(*ecdsa.PublicKey).Equal(old.Public()) {
		t.Errorf("the key stored under an older kid is not found by it: %v", k)
	}
}

// appendedClaims encode themselves differently from json.Marshal, so that a test
// can tell which encoding Sign used.
type appendedClaims struct {
	jwt.RegisteredClaims
	err error
}

func (c appendedClaims) AppendClaims(b []byte) ([]byte, error) {
	o := NewClaimsJSON(b)
	o.Registered(&c.RegisteredClaims)
	o.String("appended", "yes", false)
	out, _ := o.End(nil)
	return out, c.err
}

// TestSignClaimsAppender: Sign signs the JSON claims append themselves, in every
// algorithm, and fails with their error.
func TestSignClaimsAppender(t *testing.T) {
	s := openSet(t, openStore(t, t.TempDir()))
	for _, alg := range Algorithms {
		token, err := s.Sign(alg, "JWT", appendedClaims{RegisteredClaims: testClaims()})
		if err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
		parse(t, token, alg, s.Active(alg).Public())
		payload, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[1])
		if err != nil {
			t.Fatal(err)
		}
		want, _ := appendedClaims{RegisteredClaims: testClaims()}.AppendClaims(nil)
		if !bytes.Equal(payload, want) {
			t.Errorf("%s: payload %s, want %s", alg, payload, want)
		}
	}
	wrong := errors.New("cannot encode")
	if _, err := s.Sign(ES256, "JWT", appendedClaims{RegisteredClaims: testClaims(), err: wrong}); !errors.Is(err, wrong) {
		t.Errorf("Sign = %v, want %v", err, wrong)
	}
}
