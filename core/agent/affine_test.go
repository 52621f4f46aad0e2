package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math/big"
	"testing"

	"filippo.io/edwards25519"
)

// affineCandidates are encodings that exercise every branch of a point's
// encoding: every y >= p (19 values) and y in {0, 1, p-1} (where x = 0 or the
// point has small order), each with either sign bit, the small-order table, and
// pseudo-random 32-byte strings (about half of which decode).
func affineCandidates() [][]byte {
	var out [][]byte
	withSigns := func(y *big.Int) {
		b := littleEndian32(y)
		out = append(out, b, append(bytes.Clone(b[:31]), b[31]|0x80))
	}
	for i := range 19 {
		withSigns(new(big.Int).Add(fieldP, big.NewInt(int64(i))))
	}
	withSigns(big.NewInt(0))
	withSigns(big.NewInt(1))
	withSigns(new(big.Int).Sub(fieldP, big.NewInt(1)))
	for _, so := range smallOrderEncodings {
		raw, _ := hex.DecodeString(so.hex)
		out = append(out, raw)
	}
	for i := range 4000 {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(i))
		sum := sha256.Sum256(n[:])
		out = append(out, sum[:])
	}
	return out
}

// TestAffineBytesAsBytes: the inversion-free encoding checkedPoint compares a
// key with answers exactly what Point.Bytes answers, for every point SetBytes
// decodes (canonical or not, small order or not) and for a point whose Z is not
// 1 (where it is Bytes itself); checkedPoint therefore refuses and accepts the
// same keys as the re-encoding it replaces.
func TestAffineBytesAsBytes(t *testing.T) {
	decoded := 0
	for _, enc := range affineCandidates() {
		p, err := new(edwards25519.Point).SetBytes(enc)
		if err != nil {
			continue
		}
		decoded++
		if got, want := affineBytes(p), p.Bytes(); !bytes.Equal(got[:], want) {
			t.Errorf("%x: affineBytes %x, Bytes %x", enc, got, want)
		}
		sum := new(edwards25519.Point).Add(p, edwards25519.NewGeneratorPoint()) // Z != 1
		if got, want := affineBytes(sum), sum.Bytes(); !bytes.Equal(got[:], want) {
			t.Errorf("%x + B: affineBytes %x, Bytes %x", enc, got, want)
		}
	}
	if decoded < 1000 {
		t.Fatalf("only %d candidates decode", decoded)
	}
}

func FuzzAffineBytes(f *testing.F) {
	for _, enc := range affineCandidates()[:64] {
		f.Add(enc)
	}
	f.Fuzz(func(t *testing.T, enc []byte) {
		p, err := new(edwards25519.Point).SetBytes(enc)
		if err != nil {
			return
		}
		if got, want := affineBytes(p), p.Bytes(); !bytes.Equal(got[:], want) {
			t.Errorf("%x: affineBytes %x, Bytes %x", enc, got, want)
		}
	})
}

// BenchmarkCheckedPoint is the full check of a key seen for the first time
// (checkedPoint), beside the two encodings it could compare the key with.
//
//	go test -run '^$' -bench BenchmarkCheckedPoint -count 6 ./core/agent
func BenchmarkCheckedPoint(b *testing.B) {
	key := newTestAgent(&testing.T{}, "d", "bench").pub
	p, err := new(edwards25519.Point).SetBytes(key)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("checkedPoint", func(b *testing.B) {
		for b.Loop() {
			if _, err := checkedPoint(key); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Bytes", func(b *testing.B) {
		for b.Loop() {
			p.Bytes()
		}
	})
	b.Run("affineBytes", func(b *testing.B) {
		for b.Loop() {
			affineBytes(p)
		}
	})
}
