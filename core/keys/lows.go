package keys

import (
	"crypto/elliptic"
	"math/big"
)

// ES256SignatureSize is the size of an ES256 JWS signature: r || s, 32 bytes each,
// big-endian (RFC 7518, section 3.4).
const ES256SignatureSize = 64

// p256N is the order n of P-256; p256HalfN is (n-1)/2, the largest low s.
var (
	p256N     = elliptic.P256().Params().N
	p256HalfN = new(big.Int).Rsh(p256N, 1)
)

// ECDSA signatures are malleable: when (r, s) verifies, so does (r, n-s), so anyone
// holding a token can make a second token string, with the same claims, that
// verifies too. palmgate signs only the low form (s <= n/2) and refuses the high one
// in the tokens it issued, so that each signed token is exactly one string.

// LowS reports whether sig, an ES256 JWS signature, has 0 < s <= n/2.
func LowS(sig []byte) bool {
	if len(sig) != ES256SignatureSize {
		return false
	}
	s := new(big.Int).SetBytes(sig[32:])
	return s.Sign() > 0 && s.Cmp(p256HalfN) <= 0
}

// NormalizeS returns sig, an ES256 JWS signature, with s replaced by n - s when
// n/2 < s < n: the low form of the same signature. Any other input is returned
// unchanged (a signature with s = 0 or s >= n verifies in neither form).
func NormalizeS(sig []byte) []byte {
	if len(sig) != ES256SignatureSize {
		return sig
	}
	s := new(big.Int).SetBytes(sig[32:])
	if s.Cmp(p256HalfN) <= 0 || s.Cmp(p256N) >= 0 {
		return sig
	}
	out := make([]byte, ES256SignatureSize)
	copy(out, sig[:32])
	s.Sub(p256N, s).FillBytes(out[32:])
	return out
}
