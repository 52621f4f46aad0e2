package keys

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/big"

	"filippo.io/bigmod"
	"github.com/golang-jwt/jwt/v5"
)

// palmgate verifies most of the ES256 tokens it verifies (access tokens at every
// protected request whose token is not cached yet, refresh tokens, token hints)
// with keys it holds the private half of. For such a key, Q = d·G, and the ECDSA
// verification equation u1·G + u2·Q collapses to one multiplication of the base
// point: (u1 + u2·d)·G = (s⁻¹·(e + r·d))·G. Go's nistec multiplies G from a
// precomputed table, so this is about 4.6 times cheaper than ecdsa.Verify, which
// must also multiply Q (71 µs against 15 µs on the bench machine), and it accepts
// exactly the signatures ecdsa.Verify accepts (TestOwnES256EdgeValues,
// FuzzOwnES256MatchesECDSA). Not in FIPS 140-3 mode (Key.withOwn).
//
// The private scalar d only meets constant-time code: filippo.io/bigmod (the
// standard library's own crypto/internal/fips140/bigmod, exported) for r·d and
// the sums and products mod n, and crypto/ecdh's scalar multiplication of G.
// What is computed in variable time is public: s⁻¹ (s is in the token), e (the
// hash of the token) and the x of the resulting point, whose comparison with r is
// the verdict every verification reveals anyway.

// p256Order is n, the order of P-256, for bigmod.
var p256Order = func() *bigmod.Modulus {
	m, err := bigmod.NewModulus(p256N.Bytes())
	if err != nil {
		panic(err)
	}
	return m
}()

// OwnES256Key is the verification key of an ES256 key of the set: its public key
// and its private scalar, used by OwnES256 to verify. Set.Key returns it for ES256
// keys; bearer.KeyFunc makes the token's method OwnES256 when it sees one.
type OwnES256Key struct {
	public *ecdsa.PublicKey
	d      *bigmod.Nat // the private scalar, mod n
}

// newOwnES256Key makes the verification key of priv, after checking that priv's
// public key is d·G: the shortcut is exact only then.
func newOwnES256Key(priv *ecdsa.PrivateKey) (*OwnES256Key, error) {
	if err := onP256(priv); err != nil {
		return nil, err
	}
	b, err := priv.Bytes()
	if err != nil {
		return nil, fmt.Errorf("ES256 key: %w", err)
	}
	d, err := bigmod.NewNat().SetBytes(b, p256Order)
	if err != nil {
		return nil, fmt.Errorf("ES256 key: %w", err)
	}
	e, err := priv.ECDH()
	if err != nil {
		return nil, fmt.Errorf("ES256 key: %w", err)
	}
	pub, err := priv.PublicKey.ECDH()
	if err != nil || !pub.Equal(e.PublicKey()) {
		return nil, errors.New("ES256 key: the public key is not the private key's")
	}
	return &OwnES256Key{public: &priv.PublicKey, d: d}, nil
}

// onP256 refuses an ES256 key on another curve than P-256 (a store edited by
// hand), naming the curve.
func onP256(priv *ecdsa.PrivateKey) error {
	if priv.Curve == elliptic.P256() {
		return nil
	}
	name := "an unknown curve"
	if priv.Curve != nil {
		name = priv.Curve.Params().Name
	}
	return fmt.Errorf("ES256 key on %s, not P-256", name)
}

// Public is the key's public half.
func (k *OwnES256Key) Public() *ecdsa.PublicKey { return k.public }

// verify reports whether sig, an ES256 JWS signature (r || s), is a valid
// signature of hash by k: what ecdsa.Verify(k.Public(), hash, r, s) reports.
func (k *OwnES256Key) verify(hash, sig []byte) bool {
	if len(sig) != ES256SignatureSize {
		return false
	}
	r, err := bigmod.NewNat().SetBytes(sig[:32], p256Order) // refuses r >= n
	if err != nil || r.IsZero() == 1 {
		return false
	}
	s := new(big.Int).SetBytes(sig[32:])
	if s.Sign() == 0 || s.Cmp(p256N) >= 0 {
		return false
	}
	w, err := bigmod.NewNat().SetBytes(new(big.Int).ModInverse(s, p256N).FillBytes(make([]byte, 32)), p256Order)
	if err != nil {
		return false
	}
	// e is the hash as an integer (SHA-256 is as long as n: no truncation), which
	// may exceed n once (ecdsa's hashToNat).
	e, err := bigmod.NewNat().SetOverflowingBytes(hash, p256Order)
	if err != nil {
		return false
	}
	// scalar = s⁻¹·(e + r·d) mod n, in constant time: it holds d.
	scalar, _ := bigmod.NewNat().SetBytes(sig[:32], p256Order)
	scalar.Mul(k.d, p256Order).Add(e, p256Order).Mul(w, p256Order)
	if scalar.IsZero() == 1 { // the point at infinity: no x, never valid
		return false
	}
	point, err := ecdh.P256().NewPrivateKey(scalar.Bytes(p256Order)) // scalar·G, in constant time
	if err != nil {
		return false
	}
	xy := point.PublicKey().Bytes() // 0x04 || x || y
	x, err := bigmod.NewNat().SetOverflowingBytes(xy[1:33], p256Order)
	return err == nil && x.Equal(r) == 1
}

// OwnES256 is the ES256 signing method of golang-jwt with Verify taking an
// OwnES256Key (any other key goes to jwt.SigningMethodES256). It signs nothing:
// Set.Sign signs with the key's own method.
var OwnES256 jwt.SigningMethod = ownES256Method{}

type ownES256Method struct{}

func (ownES256Method) Alg() string { return ES256 }

func (ownES256Method) Sign(string, any) ([]byte, error) {
	return nil, errors.New("keys.OwnES256 only verifies")
}

// Verify is jwt.SigningMethodES256's: the signature is r || s of 32 bytes each,
// of the SHA-256 of signingString.
func (ownES256Method) Verify(signingString string, sig []byte, key any) error {
	own, ok := key.(*OwnES256Key)
	if !ok {
		return jwt.SigningMethodES256.Verify(signingString, sig, key)
	}
	hash := sha256.Sum256([]byte(signingString))
	if !own.verify(hash[:], sig) {
		return jwt.ErrECDSAVerification
	}
	return nil
}
