package testserver

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/skip2/go-qrcode"
)

// TestDecodeQR checks the decoder against the encoder the pages use, over every
// error correction level, the numeric, alphanumeric and byte modes and lengths
// that span the versions.
func TestDecodeQR(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gen := func(alphabet string, n int) string {
		var b strings.Builder
		for range n {
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	alphabets := map[string]string{
		"numeric":      "0123456789",
		"alphanumeric": "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ $%*+-./:",
		"bytes":        "abcdefghijklmnopqrstuvwxyz0123456789-_.~:/?#[]@!&'()*+,;=%",
	}
	levels := map[string]qrcode.RecoveryLevel{"L": qrcode.Low, "M": qrcode.Medium, "Q": qrcode.High, "H": qrcode.Highest}
	versions := map[int]bool{}
	decoded := 0
	for lname, level := range levels {
		for aname, alphabet := range alphabets {
			for _, n := range []int{1, 2, 3, 7, 20, 45, 90, 150, 260, 400, 700, 1000, 1270} {
				text := gen(alphabet, n)
				q, err := qrcode.New(text, level)
				if err != nil {
					continue // too long for this level
				}
				versions[q.VersionNumber] = true
				// Whole pixels per module, as the pages render it: a fixed-size
				// rendering gives modules of uneven width, which gozxing misreads
				// from version 8 on (its dimension estimate is one module off).
				for _, size := range []int{-3, -5} {
					data, err := q.PNG(size)
					if err != nil {
						t.Fatal(err)
					}
					img, err := png.Decode(bytes.NewReader(data))
					if err != nil {
						t.Fatal(err)
					}
					got, err := DecodeQR(img)
					decoded++
					if err != nil || got != text {
						t.Errorf("%s level %s, %d chars, version %d, size %d: got %q, %v", aname, lname, n, q.VersionNumber, size, trim(got), err)
					}
				}
			}
		}
	}
	t.Logf("versions exercised: %d, images: %d", len(versions), decoded)
	if len(versions) < 20 {
		t.Errorf("only versions %v exercised", versions)
	}
}

func trim(s string) string {
	if len(s) > 40 {
		return fmt.Sprintf("%s...(%d)", s[:40], len(s))
	}
	return s
}

// TestDecodeQRBlank: an image without a QR code is an error, not a text.
func TestDecodeQRBlank(t *testing.T) {
	if got, err := DecodeQR(image.NewGray(image.Rect(0, 0, 50, 50))); err == nil {
		t.Errorf("a blank image decoded as %q", got)
	}
}
