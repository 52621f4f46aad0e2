package palm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// TestEngineKeyRoundTrip: a key pair from NewEngineKey is what palm_attestor
// takes (ParseAttestorKey) and what an Engine signs with (ParseEngineKey), and
// its assertions pass the verifier with the algorithm its type pins.
func TestEngineKeyRoundTrip(t *testing.T) {
	clock := newFakeClock()
	for _, c := range []struct {
		p256 bool
		alg  string
	}{{false, "EdDSA"}, {true, "ES256"}} {
		privPEM, pub, err := NewEngineKey(c.p256)
		if err != nil {
			t.Fatalf("NewEngineKey(%v): %v", c.p256, err)
		}
		if !strings.HasPrefix(string(privPEM), "-----BEGIN PRIVATE KEY-----\n") {
			t.Errorf("private key is not PKCS#8 PEM:\n%s", privPEM)
		}
		pubKey, err := ParseAttestorKey(pub)
		if err != nil {
			t.Fatalf("ParseAttestorKey(%q): %v", pub, err)
		}
		key, err := ParseEngineKey(privPEM)
		if err != nil {
			t.Fatalf("ParseEngineKey: %v", err)
		}
		v, err := NewVerifier(testIssuer, []Attestor{{Name: "engine", Key: pubKey}}, clock.Now)
		if err != nil {
			t.Fatal(err)
		}
		jws, err := Engine{Name: "engine", Audience: testIssuer, Key: key, Now: clock.Now}.Sign("challenge-1", "nonce-1", "palm-subject-1")
		if err != nil {
			t.Fatalf("Sign: %v", err)
		}
		tok, _, err := jwt.NewParser().ParseUnverified(jws, &Claims{})
		if err != nil || tok.Method.Alg() != c.alg {
			t.Errorf("assertion alg = %v (%v), want %s", tok.Method.Alg(), err, c.alg)
		}
		claims, err := v.Verify(jws)
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		if claims.Issuer != "engine" || claims.Subject != "palm-subject-1" || claims.Challenge != "challenge-1" || claims.Nonce != "nonce-1" ||
			!claims.IssuedAt.Equal(clock.Now()) || claims.ExpiresAt.Sub(clock.Now()) != EngineAssertionLifetime {
			t.Errorf("claims = %+v", claims)
		}
		// Another attestor's name is an unknown attestor.
		other, _ := Engine{Name: "other", Audience: testIssuer, Key: key, Now: clock.Now}.Sign("challenge-1", "nonce-1", "s")
		if _, err := v.Verify(other); !errors.Is(err, ErrBadAssertion) {
			t.Errorf("Verify of another attestor's name: %v, want ErrBadAssertion", err)
		}
	}
}

// TestParseEngineKeyRefuses: what is not an Ed25519 or P-256 private key in PEM
// is refused with a message saying what it is.
func TestParseEngineKeyRefuses(t *testing.T) {
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 1024)
	rsaDER, _ := x509.MarshalPKCS8PrivateKey(rsaKey)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p384DER, _ := x509.MarshalPKCS8PrivateKey(p384)
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	sec1, _ := x509.MarshalECPrivateKey(p256)
	pubDER, _ := x509.MarshalPKIXPublicKey(p256.Public())
	enc := func(typ string, der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}) }
	for name, c := range map[string]struct {
		data []byte
		want string
	}{
		"not PEM":    {[]byte("MCowBQYDK2VwAyEA"), "no PEM block"},
		"public key": {enc("PUBLIC KEY", pubDER), `"PUBLIC KEY", not a private key`},
		"garbage":    {enc("PRIVATE KEY", []byte("junk")), "cannot be read"},
		"RSA":        {enc("PRIVATE KEY", rsaDER), "must be Ed25519 or ECDSA P-256"},
		"P-384":      {enc("PRIVATE KEY", p384DER), "must be Ed25519 or ECDSA P-256"},
	} {
		if _, err := ParseEngineKey(c.data); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: ParseEngineKey = %v, want an error containing %q", name, err, c.want)
		}
	}
	if _, err := ParseEngineKey(enc("EC PRIVATE KEY", sec1)); err != nil {
		t.Errorf("SEC 1 P-256 key: %v", err)
	}
}
