// Package jwttest makes the altered twins of a real token that palmgate's tests
// must see refused.
package jwttest

import (
	"crypto/elliptic"
	"encoding/base64"
	"math/big"
	"strings"
	"testing"
)

// Malleate returns token with its ES256 signature (r, s) replaced by (r, n-s),
// which ECDSA verification alone accepts just as well: a second string of the
// same token.
func Malleate(t testing.TB, token string) string {
	t.Helper()
	i := strings.LastIndexByte(token, '.')
	sig, err := base64.RawURLEncoding.DecodeString(token[i+1:])
	if err != nil || len(sig) != 64 {
		t.Fatalf("not an ES256 signature: %v", err)
	}
	s := new(big.Int).SetBytes(sig[32:])
	new(big.Int).Sub(elliptic.P256().Params().N, s).FillBytes(sig[32:])
	return token[:i+1] + base64.RawURLEncoding.EncodeToString(sig)
}

// StrayBits returns token with the unused low bits of its (64-byte) signature
// segment's last character set: the same bytes to a lenient base64 decoder,
// another string.
func StrayBits(token string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, token[len(token)-1])
	// 64 bytes are 86 characters: the last one carries 2 bits and 4 unused ones.
	return token[:len(token)-1] + string(alphabet[last|0x0f])
}
