package palm

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/internal/clocktest"
)

const testIssuer = "https://id.example.com"

// fakeClock is the injected clock: tests move it, nothing sleeps.
type fakeClock = clocktest.Clock

func newFakeClock() *fakeClock {
	return clocktest.New(time.Date(2026, 11, 21, 20, 0, 0, 0, time.UTC))
}

// testAttestor is a palm engine the tests control: a name, a signing key and the
// JWS algorithm its key type implies.
type testAttestor struct {
	name   string
	method jwt.SigningMethod
	priv   crypto.Signer
}

func newEd25519Attestor(t *testing.T, name string) *testAttestor {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &testAttestor{name: name, method: jwt.SigningMethodEdDSA, priv: priv}
}

func newP256Attestor(t *testing.T, name string) *testAttestor {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &testAttestor{name: name, method: jwt.SigningMethodES256, priv: priv}
}

func (a *testAttestor) attestor() Attestor {
	return Attestor{Name: a.name, Key: a.priv.Public()}
}

// claims are valid claims of this attestor at now for a challenge.
func (a *testAttestor) claims(now time.Time, challengeID, nonce, subject string) jwt.MapClaims {
	return jwt.MapClaims{
		"iss":       a.name,
		"aud":       testIssuer,
		"sub":       subject,
		"challenge": challengeID,
		"nonce":     nonce,
		"iat":       now.Unix(),
		"exp":       now.Add(time.Minute).Unix(),
	}
}

// sign signs claims with the attestor's key and algorithm.
func (a *testAttestor) sign(t *testing.T, claims jwt.Claims) string {
	t.Helper()
	return signJWS(t, a.method, a.priv, claims)
}

func signJWS(t *testing.T, method jwt.SigningMethod, key any, claims jwt.Claims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatalf("signing %s assertion: %v", method.Alg(), err)
	}
	return s
}

func spki(t *testing.T, key crypto.PublicKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(der)
}

func TestVerifierAccepts(t *testing.T) {
	clock := newFakeClock()
	ed, es := newEd25519Attestor(t, "engine-ed"), newP256Attestor(t, "engine-p256")
	v, err := NewVerifier(testIssuer, []Attestor{ed.attestor(), es.attestor()}, clock.Now)
	if err != nil {
		t.Fatalf("NewVerifier: %v", err)
	}
	now := clock.Now()
	tests := []struct {
		name   string
		a      *testAttestor
		modify func(jwt.MapClaims)
	}{
		{"EdDSA", ed, nil},
		{"ES256", es, nil},
		{"audience among several", ed, func(c jwt.MapClaims) { c["aud"] = []string{"https://other.example", testIssuer} }},
		{"lifetime exactly 5m", es, func(c jwt.MapClaims) { c["exp"] = now.Add(MaxAssertionLifetime).Unix() }},
		{"expired within leeway", ed, func(c jwt.MapClaims) {
			c["iat"], c["exp"] = now.Add(-time.Minute).Unix(), now.Add(-clockLeeway+time.Second).Unix()
		}},
		{"issued slightly in the future", ed, func(c jwt.MapClaims) {
			c["iat"], c["exp"] = now.Add(10*time.Second).Unix(), now.Add(time.Minute).Unix()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.a.claims(now, "challenge-1", "nonce-1", "alice")
			if tt.modify != nil {
				tt.modify(c)
			}
			got, err := v.Verify(tt.a.sign(t, c))
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if got.Issuer != tt.a.name || got.Subject != "alice" || got.Challenge != "challenge-1" || got.Nonce != "nonce-1" {
				t.Errorf("claims = %+v", got)
			}
		})
	}
}

func TestVerifierRefuses(t *testing.T) {
	clock := newFakeClock()
	ed, es := newEd25519Attestor(t, "engine-ed"), newP256Attestor(t, "engine-p256")
	v, err := NewVerifier(testIssuer, []Attestor{ed.attestor(), es.attestor()}, clock.Now)
	if err != nil {
		t.Fatalf("NewVerifier: %v", err)
	}
	now := clock.Now()
	valid := func() jwt.MapClaims { return ed.claims(now, "challenge-1", "nonce-1", "alice") }
	with := func(modify func(jwt.MapClaims)) jwt.MapClaims {
		c := valid()
		modify(c)
		return c
	}
	stranger := newEd25519Attestor(t, "engine-ed") // same name, another key
	edPub := ed.priv.Public().(ed25519.PublicKey)
	edDER, _ := x509.MarshalPKIXPublicKey(edPub)
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, valid()).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name      string
		assertion string
	}{
		{"unknown iss", ed.sign(t, with(func(c jwt.MapClaims) { c["iss"] = "engine-unknown" }))},
		{"missing iss", ed.sign(t, with(func(c jwt.MapClaims) { delete(c, "iss") }))},
		{"wrong aud", ed.sign(t, with(func(c jwt.MapClaims) { c["aud"] = "https://evil.example.com" }))},
		{"aud with a path", ed.sign(t, with(func(c jwt.MapClaims) { c["aud"] = testIssuer + "/oauth2" }))},
		{"missing aud", ed.sign(t, with(func(c jwt.MapClaims) { delete(c, "aud") }))},
		{"expired", ed.sign(t, with(func(c jwt.MapClaims) {
			c["iat"], c["exp"] = now.Add(-3*time.Minute).Unix(), now.Add(-clockLeeway-time.Second).Unix()
		}))},
		{"exp missing", ed.sign(t, with(func(c jwt.MapClaims) { delete(c, "exp") }))},
		{"iat missing", ed.sign(t, with(func(c jwt.MapClaims) { delete(c, "iat") }))},
		{"iat in the future", ed.sign(t, with(func(c jwt.MapClaims) {
			c["iat"], c["exp"] = now.Add(2*time.Minute).Unix(), now.Add(3*time.Minute).Unix()
		}))},
		{"exp-iat over 5m", ed.sign(t, with(func(c jwt.MapClaims) { c["exp"] = now.Add(MaxAssertionLifetime + time.Second).Unix() }))},
		{"exp-iat a day", ed.sign(t, with(func(c jwt.MapClaims) {
			c["iat"], c["exp"] = now.Add(-time.Hour).Unix(), now.Add(23*time.Hour).Unix()
		}))},
		{"signed by another key", stranger.sign(t, valid())},
		{"ES256 token for the Ed25519 attestor", es.sign(t, valid())},
		{"EdDSA token for the P-256 attestor", ed.sign(t, with(func(c jwt.MapClaims) { c["iss"] = es.name }))},
		{"ES384 token for the P-256 attestor", signJWS(t, jwt.SigningMethodES384, mustP384(t), with(func(c jwt.MapClaims) { c["iss"] = es.name }))},
		{"ES384 token signed by the P-256 attestor's own key", es384WithP256(t, es.priv.(*ecdsa.PrivateKey), with(func(c jwt.MapClaims) { c["iss"] = es.name }))},
		{"alg none", none},
		{"HS256 with the raw public key", signJWS(t, jwt.SigningMethodHS256, []byte(edPub), valid())},
		{"HS256 with the SPKI bytes", signJWS(t, jwt.SigningMethodHS256, edDER, valid())},
		{"HS256 with the base64 SPKI", signJWS(t, jwt.SigningMethodHS256, []byte(spki(t, edPub)), valid())},
		{"missing challenge", ed.sign(t, with(func(c jwt.MapClaims) { delete(c, "challenge") }))},
		{"empty challenge", ed.sign(t, with(func(c jwt.MapClaims) { c["challenge"] = "" }))},
		{"missing nonce", ed.sign(t, with(func(c jwt.MapClaims) { delete(c, "nonce") }))},
		{"missing sub", ed.sign(t, with(func(c jwt.MapClaims) { delete(c, "sub") }))},
		{"signature of another token", func() string {
			a := strings.Split(ed.sign(t, valid()), ".")
			b := strings.Split(ed.sign(t, with(func(c jwt.MapClaims) { c["sub"] = "mallory" })), ".")
			return b[0] + "." + b[1] + "." + a[2]
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claims, err := v.Verify(tt.assertion)
			if err == nil {
				t.Fatalf("Verify accepted: %+v", claims)
			}
			if !errors.Is(err, ErrBadAssertion) || errors.Is(err, ErrMalformed) {
				t.Errorf("Verify error = %v, want ErrBadAssertion", err)
			}
		})
	}
}

// es384WithP256 signs claims as ES384 with a P-256 key, which the JWT library
// verifies when the algorithm is not pinned to the key's type (it does not check
// the curve on verification).
func es384WithP256(t *testing.T, priv *ecdsa.PrivateKey, claims jwt.MapClaims) string {
	t.Helper()
	enc := base64.RawURLEncoding
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	signing := enc.EncodeToString([]byte(`{"alg":"ES384","typ":"JWT"}`)) + "." + enc.EncodeToString(payload)
	digest := sha512.Sum384([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, priv, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 96)
	r.FillBytes(sig[:48])
	s.FillBytes(sig[48:])
	return signing + "." + enc.EncodeToString(sig)
}

func mustP384(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestVerifierMalformed(t *testing.T) {
	clock := newFakeClock()
	ed := newEd25519Attestor(t, "engine-ed")
	v, err := NewVerifier(testIssuer, []Attestor{ed.attestor()}, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	claims := ed.claims(clock.Now(), "challenge-1", "nonce-1", "alice")

	// A valid assertion just under the size limit is accepted; one just over is not.
	var under, over string
	for pad := maxAssertionLen*3/4 - 600; under == "" || over == ""; pad++ {
		claims["pad"] = strings.Repeat("p", pad)
		s := ed.sign(t, claims)
		switch {
		case len(s) <= maxAssertionLen:
			under = s
		case over == "":
			over = s
		}
		if pad > maxAssertionLen {
			t.Fatal("could not build assertions around the size limit")
		}
	}
	if _, err := v.Verify(under); err != nil {
		t.Errorf("Verify of a %d-byte assertion: %v", len(under), err)
	}

	tests := []struct{ name, assertion string }{
		{"empty", ""},
		{"not a JWS", "hello world"},
		{"two parts", "eyJhbGciOiJFZERTQSJ9.e30"},
		{"bad base64", "!!!.???.***"},
		{"header not JSON", base64.RawURLEncoding.EncodeToString([]byte("nope")) + ".e30.c2ln"},
		{"iss not a string", signJWS(t, ed.method, ed.priv, jwt.MapClaims{"iss": 42, "aud": testIssuer})},
		{"over 8 KiB", over},
		{"huge", strings.Repeat("a", 1<<20)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claims, err := v.Verify(tt.assertion)
			if err == nil {
				t.Fatalf("Verify accepted: %+v", claims)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("Verify error = %v, want ErrMalformed", err)
			}
		})
	}
}

func TestParseAttestorKey(t *testing.T) {
	edPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	edSPKI := spki(t, edPub)
	tests := []struct {
		name string
		b64  string
		alg  string // "": refused
	}{
		{"Ed25519", edSPKI, "EdDSA"},
		{"P-256", spki(t, &p256.PublicKey), "ES256"},
		{"P-384", spki(t, &mustP384(t).PublicKey), ""},
		{"RSA", spki(t, &rsaKey.PublicKey), ""},
		{"bad base64", "not*base64", ""},
		{"empty", "", ""},
		{"raw Ed25519 key", base64.StdEncoding.EncodeToString(edPub), ""},
		{"truncated SPKI", edSPKI[:len(edSPKI)-8], ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, err := ParseAttestorKey(tt.b64)
			if tt.alg == "" {
				if err == nil {
					t.Fatalf("ParseAttestorKey accepted a %T", key)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseAttestorKey: %v", err)
			}
			if alg, err := algorithmFor(key); err != nil || alg != tt.alg {
				t.Errorf("algorithm = %q (%v), want %s", alg, err, tt.alg)
			}
		})
	}
}

func TestNewVerifierRefusesBadAttestors(t *testing.T) {
	ed := newEd25519Attestor(t, "engine")
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		attestors []Attestor
	}{
		{"no name", []Attestor{{Name: "", Key: ed.priv.Public()}}},
		{"duplicate name", []Attestor{ed.attestor(), newP256Attestor(t, "engine").attestor()}},
		{"RSA key", []Attestor{{Name: "rsa", Key: &rsaKey.PublicKey}}},
		{"P-384 key", []Attestor{{Name: "p384", Key: &mustP384(t).PublicKey}}},
		{"private key", []Attestor{{Name: "priv", Key: ed.priv}}},
		{"nil key", []Attestor{{Name: "nil"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewVerifier(testIssuer, tt.attestors, time.Now); err == nil {
				t.Error("NewVerifier accepted")
			}
		})
	}
}
