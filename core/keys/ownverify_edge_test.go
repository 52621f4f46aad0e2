package keys

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/rand"
	"fmt"
	"math/big"
	"testing"
)

// TestOwnES256EdgeValues: the inputs random fuzzing does not reach, compared with
// ecdsa.Verify (2026-11-27): every pair of r and s among the boundary values (0,
// 1, (n-1)/2 and its successor, n-1, n, n+1, 2²⁵⁶-1) with hashes at the
// boundaries (0, n-1, n, n+1, 2²⁵⁶-1); valid signatures of hashes ≥ n (the
// verification reduces them); and valid signatures whose verification scalar
// s⁻¹·(e + r·d) is 1, 2, n-2 or n-1 (the ends of what the base-point
// multiplication takes), built with the private key, and the same with a hash
// off by one.
func TestOwnES256EdgeValues(t *testing.T) {
	priv, own := ownTestKey(t)
	n := p256N
	one := big.NewInt(1)
	add := func(a *big.Int, b int64) *big.Int { return new(big.Int).Add(a, big.NewInt(b)) }
	max256 := new(big.Int).Sub(new(big.Int).Lsh(one, 256), one)
	halfN := new(big.Int).Rsh(n, 1)
	// sig256 is r || s, each value's low 256 bits (every value here fits).
	sig256 := func(r, s *big.Int) []byte { return rs(r, s) }
	check := func(name string, hash, sig []byte, wantValid bool) {
		t.Helper()
		want := stdVerify(&priv.PublicKey, hash, sig)
		if got := own.verify(hash, sig); got != want {
			t.Fatalf("%s: own %v, ecdsa.Verify %v", name, got, want)
		}
		if wantValid && !want {
			t.Fatalf("%s: ecdsa.Verify refused a signature built valid", name)
		}
	}

	values := []*big.Int{big.NewInt(0), one, halfN, add(halfN, 1), add(n, -1), n, add(n, 1), max256}
	hashes := []*big.Int{big.NewInt(0), add(n, -1), n, add(n, 1), max256}
	for hi, h := range hashes {
		hash := h.FillBytes(make([]byte, 32))
		for ri, r := range values {
			for si, s := range values {
				check(fmt.Sprintf("hash %d, r %d, s %d", hi, ri, si), hash, sig256(r, s), false)
			}
		}
		// A valid signature of this hash (crypto/ecdsa reduces a hash ≥ n).
		r, s, err := ecdsa.Sign(rand.Reader, priv, hash)
		if err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("hash %d, valid", hi), hash, rs(r, s), true)
		check(fmt.Sprintf("hash %d, valid, other s", hi), hash, rs(r, new(big.Int).Sub(n, s)), true)
	}

	// Valid signatures with the verification scalar t chosen: R = t·G, r = x(R)
	// mod n, and for a chosen s, e = s·t - r·d mod n.
	for _, tv := range []*big.Int{one, big.NewInt(2), add(n, -2), add(n, -1)} {
		k, err := ecdh.P256().NewPrivateKey(tv.FillBytes(make([]byte, 32)))
		if err != nil {
			t.Fatal(err)
		}
		x := new(big.Int).SetBytes(k.PublicKey().Bytes()[1:33])
		r := x.Mod(x, n)
		for _, s := range []*big.Int{one, halfN, add(halfN, 1), add(n, -1)} {
			e := new(big.Int).Mul(s, tv)
			e.Sub(e, new(big.Int).Mul(r, priv.D)).Mod(e, n)
			name := fmt.Sprintf("scalar %x, s %x", tv, s)
			check(name, e.FillBytes(make([]byte, 32)), rs(r, s), true)
			check(name+", hash + 1", add(e, 1).FillBytes(make([]byte, 32)), rs(r, s), false)
			if sum := new(big.Int).Add(e, n); sum.BitLen() <= 256 {
				check(name+", hash + n", sum.FillBytes(make([]byte, 32)), rs(r, s), true)
			}
		}
	}
}
