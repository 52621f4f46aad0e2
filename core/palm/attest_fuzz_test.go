package palm

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/internal/clocktest"
)

// The fuzz target of the palm assertion, the outside input of POST
// /v1/palm/challenges/{id}/assertion. Seeds: testdata/fuzz/FuzzVerifyAssertion/ and
// the f.Add calls below. The attestor keys and the clock are fixed, so the valid
// assertions among the seeds stay valid.

const (
	fuzzAudience    = "https://id.example.test"
	fuzzEdName      = "engine-ed25519"
	fuzzP256Name    = "engine-p256"
	fuzzChallenge   = "0b0c5a8e-7d1c-4b51-9a5e-0f6f5b1d2c3a"
	fuzzNonce       = "bm9uY2Utbm9uY2Utbm9uY2U"
	fuzzPalmSubject = "palm-subject-alice"
)

// fuzzNow is the fixed clock of FuzzVerifyAssertion.
var fuzzNow = time.Unix(1_800_000_000, 0).UTC()

// fuzzAttestorKeys are the fixed keys of the two attestors.
func fuzzAttestorKeys(tb testing.TB) (ed25519.PrivateKey, *ecdsa.PrivateKey) {
	tb.Helper()
	edSeed := sha256.Sum256([]byte("palmgate fuzz attestor ed25519"))
	p256Scalar := sha256.Sum256([]byte("palmgate fuzz attestor p256"))
	p256, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), p256Scalar[:])
	if err != nil {
		tb.Fatalf("P-256 key: %v", err)
	}
	return ed25519.NewKeyFromSeed(edSeed[:]), p256
}

// FuzzVerifyAssertion: Verifier.Verify never panics; it refuses with exactly one of
// ErrMalformed and ErrBadAssertion; and what it accepts is signed by the attestor it
// names, with that attestor's pinned algorithm (checked here with crypto/ed25519 and
// crypto/ecdsa directly), and has claims within the documented rules.
func FuzzVerifyAssertion(f *testing.F) {
	edKey, p256Key := fuzzAttestorKeys(f)
	v, err := NewVerifier(fuzzAudience, []Attestor{
		{Name: fuzzEdName, Key: edKey.Public()},
		{Name: fuzzP256Name, Key: p256Key.Public()},
	}, clocktest.New(fuzzNow).Now)
	if err != nil {
		f.Fatalf("NewVerifier: %v", err)
	}
	claims := func(iss string) jwt.MapClaims {
		return jwt.MapClaims{
			"iss": iss, "aud": fuzzAudience, "sub": fuzzPalmSubject,
			"challenge": fuzzChallenge, "nonce": fuzzNonce,
			"iat": fuzzNow.Unix(), "exp": fuzzNow.Add(time.Minute).Unix(),
		}
	}
	for _, seed := range []struct {
		method jwt.SigningMethod
		key    any
		iss    string
	}{
		{jwt.SigningMethodEdDSA, edKey, fuzzEdName},
		{jwt.SigningMethodES256, p256Key, fuzzP256Name},
	} {
		token, err := jwt.NewWithClaims(seed.method, claims(seed.iss)).SignedString(seed.key)
		if err != nil {
			f.Fatalf("signing seed: %v", err)
		}
		if _, err := v.Verify(token); err != nil {
			f.Fatalf("seed assertion refused: %v", err)
		}
		f.Add(token)
	}

	f.Fuzz(func(t *testing.T, token string) {
		got, err := v.Verify(token)
		if err != nil {
			if got != nil {
				t.Fatalf("Verify returned claims and an error: %v", err)
			}
			if errors.Is(err, ErrMalformed) == errors.Is(err, ErrBadAssertion) {
				t.Fatalf("error %v is not exactly one of ErrMalformed and ErrBadAssertion", err)
			}
			return
		}
		parts := strings.Split(token, ".")
		if len(parts) != 3 {
			t.Fatalf("accepted a token of %d parts", len(parts))
		}
		var header struct {
			Alg string `json:"alg"`
		}
		if err := decodeSegmentJSON(parts[0], &header); err != nil {
			t.Fatalf("accepted a token whose header does not decode: %v", err)
		}
		sig, err := base64.RawURLEncoding.DecodeString(parts[2])
		if err != nil {
			t.Fatalf("accepted a token whose signature does not decode: %v", err)
		}
		signed := []byte(parts[0] + "." + parts[1])
		switch got.Issuer {
		case fuzzEdName:
			if header.Alg != "EdDSA" || !ed25519.Verify(edKey.Public().(ed25519.PublicKey), signed, sig) {
				t.Fatalf("accepted alg %q without a valid Ed25519 signature of %s", header.Alg, fuzzEdName)
			}
		case fuzzP256Name:
			digest := sha256.Sum256(signed)
			if header.Alg != "ES256" || len(sig) != 64 ||
				!ecdsa.Verify(&p256Key.PublicKey, digest[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
				t.Fatalf("accepted alg %q without a valid P-256 signature of %s", header.Alg, fuzzP256Name)
			}
		default:
			t.Fatalf("accepted an assertion of unknown attestor %q", got.Issuer)
		}
		if !slices.Contains(got.Audience, fuzzAudience) {
			t.Fatalf("accepted audience %v", got.Audience)
		}
		if got.IssuedAt == nil || got.ExpiresAt == nil ||
			got.ExpiresAt.Sub(got.IssuedAt.Time) > MaxAssertionLifetime ||
			!fuzzNow.Before(got.ExpiresAt.Add(clockLeeway)) || got.IssuedAt.After(fuzzNow.Add(clockLeeway)) {
			t.Fatalf("accepted iat %v, exp %v at %v", got.IssuedAt, got.ExpiresAt, fuzzNow)
		}
		if got.Subject == "" || got.Challenge == "" || got.Nonce == "" {
			t.Fatalf("accepted empty sub, challenge or nonce: %+v", got)
		}
	})
}

func decodeSegmentJSON(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
