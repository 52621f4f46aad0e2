package agent

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// l is the order of the edwards25519 base point, little-endian, for making
// non-canonical S values (S + l).
var l = [32]byte{0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10}

// addL returns s + l (little-endian, 32 bytes, carry dropped).
func addL(s []byte) []byte {
	out := make([]byte, 32)
	carry := 0
	for i := range 32 {
		v := int(s[i]) + int(l[i]) + carry
		out[i], carry = byte(v), v>>8
	}
	return out
}

// samePointAnswer checks verifyPoint against crypto/ed25519.Verify for one input,
// for keys checkedPoint accepts (the only ones verifyPoint is given).
func samePointAnswer(t *testing.T, key ed25519.PublicKey, msg, sig []byte) {
	t.Helper()
	minusA, err := checkedPoint(key)
	if err != nil {
		return
	}
	want := ed25519.Verify(key, msg, sig)
	if got := verifyPoint(minusA, key, msg, sig); got != want {
		t.Fatalf("verifyPoint = %v, ed25519.Verify = %v\nkey %x\nmsg %x\nsig %x", got, want, key, msg, sig)
	}
}

// TestVerifyPointAsStdlib: verifyPoint decides as crypto/ed25519.Verify does for
// honest signatures, every single-bit change of signature, message and key, a
// non-canonical S (S + l, which Verify refuses), the high bits of S set, wrong
// lengths, and the same remembered point used for many messages.
func TestVerifyPointAsStdlib(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var seed [32]byte
	for i := range 12 {
		binary.LittleEndian.PutUint64(seed[:], rng.Uint64())
		priv := ed25519.NewKeyFromSeed(seed[:])
		key := priv.Public().(ed25519.PublicKey)
		msg := make([]byte, i*7)
		for j := range msg {
			msg[j] = byte(rng.Uint32())
		}
		sig := ed25519.Sign(priv, msg)
		minusA, err := checkedPoint(key)
		if err != nil {
			t.Fatal(err)
		}
		if !verifyPoint(minusA, key, msg, sig) {
			t.Fatalf("honest signature %d refused", i)
		}
		for bit := range 512 {
			samePointAnswer(t, key, msg, flipBit(sig, bit))
		}
		for bit := range min(8*len(msg), 64) {
			samePointAnswer(t, key, flipBit(msg, bit), sig)
		}
		for bit := range 256 {
			samePointAnswer(t, flipBit(key, bit), msg, sig)
		}
		nonCanonical := append(bytes.Clone(sig[:32]), addL(sig[32:])...)
		samePointAnswer(t, key, msg, nonCanonical)
		if verifyPoint(minusA, key, msg, nonCanonical) {
			t.Fatal("S + l accepted")
		}
		high := bytes.Clone(sig)
		high[63] |= 0x80
		samePointAnswer(t, key, msg, high)
		samePointAnswer(t, key, msg, sig[:63])
		samePointAnswer(t, key, msg, append(bytes.Clone(sig), 0))
		// The remembered point is not changed by use.
		if !verifyPoint(minusA, key, msg, sig) || !verifyPoint(minusA, key, msg, sig) {
			t.Fatal("a point verified once no longer verifies")
		}
	}
}

// FuzzVerifyPoint holds verifyPoint to crypto/ed25519.Verify's answer for any key
// checkedPoint accepts, message and signature, and for signatures the key made.
func FuzzVerifyPoint(f *testing.F) {
	priv := ed25519.NewKeyFromSeed(make([]byte, 32))
	key := priv.Public().(ed25519.PublicKey)
	f.Add([]byte(key), []byte("m"), ed25519.Sign(priv, []byte("m")), false)
	f.Add([]byte(key), []byte("m"), ed25519.Sign(priv, []byte("m")), true)
	f.Fuzz(func(t *testing.T, key, msg, sig []byte, sign bool) {
		if len(key) != ed25519.PublicKeySize {
			sum := sha512.Sum512(key)
			key = sum[:32]
		}
		if sign {
			// A signature this seed's key made, so that the accepting path is
			// explored as much as the refusing one.
			p := ed25519.NewKeyFromSeed(key)
			key, sig = p.Public().(ed25519.PublicKey), ed25519.Sign(p, msg)
		}
		samePointAnswer(t, key, msg, sig)
	})
}

// BenchmarkVerifyPoint compares a remembered key's verification (verifyPoint)
// with crypto/ed25519.Verify, which decodes the key every time.
func BenchmarkVerifyPoint(b *testing.B) {
	priv := ed25519.NewKeyFromSeed(make([]byte, 32))
	key := priv.Public().(ed25519.PublicKey)
	msg := []byte("agent-register-1764115200000")
	sig := ed25519.Sign(priv, msg)
	minusA, err := checkedPoint(key)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("stdlib", func(b *testing.B) {
		for b.Loop() {
			if !ed25519.Verify(key, msg, sig) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("point", func(b *testing.B) {
		for b.Loop() {
			if !verifyPoint(minusA, key, msg, sig) {
				b.Fatal("refused")
			}
		}
	})
}
