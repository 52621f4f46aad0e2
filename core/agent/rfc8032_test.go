package agent

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// rfc8032Vector is one Ed25519 test vector of RFC 8032, section 7.1.
type rfc8032Vector struct {
	name      string
	secret    string // hex seed, used only to cross-check the transcription
	publicKey string // hex
	message   []byte
	signature string // hex
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// loadTest1024 reads TEST 1024 (a 1023-byte message) from testdata, where it sits in
// the RFC's own layout: a label line followed by the hex value.
func loadTest1024(t *testing.T) rfc8032Vector {
	t.Helper()
	b, err := os.ReadFile("testdata/rfc8032-test1024.txt")
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]string{}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := 0; i+1 < len(lines); i++ {
		if label, ok := strings.CutSuffix(lines[i], ":"); ok {
			values[label] = strings.TrimSpace(lines[i+1])
		}
	}
	msg := mustHex(t, values["MESSAGE"])
	if len(msg) != 1023 {
		t.Fatalf("TEST 1024 message is %d bytes, want 1023", len(msg))
	}
	return rfc8032Vector{
		name:      "TEST 1024",
		secret:    values["SECRET KEY"],
		publicKey: values["PUBLIC KEY"],
		message:   msg,
		signature: values["SIGNATURE"],
	}
}

func rfc8032Vectors(t *testing.T) []rfc8032Vector {
	t.Helper()
	abc := sha512.Sum512([]byte("abc"))
	return []rfc8032Vector{
		{
			name:      "TEST 1",
			secret:    "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
			publicKey: "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
			message:   []byte{},
			signature: "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
		},
		{
			name:      "TEST 2",
			secret:    "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
			publicKey: "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
			message:   []byte{0x72},
			signature: "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
		},
		{
			name:      "TEST 3",
			secret:    "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
			publicKey: "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
			message:   []byte{0xaf, 0x82},
			signature: "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a",
		},
		loadTest1024(t),
		{
			name:      "TEST SHA(abc)",
			secret:    "833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42",
			publicKey: "ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf",
			message:   abc[:],
			signature: "dc2a4459e7369633a52b1bf277839a00201009a3efbf3ecb69bea2186c26b58909351fc9ac90b3ecfdfbc7c66431e0303dca179c138ac17ad9bef1177331a704",
		},
	}
}

// spkiBase64 wraps a raw Ed25519 public key as base64 DER SubjectPublicKeyInfo, the
// wire form of an AgentChallenge's publicKey.
func spkiBase64(t *testing.T, raw []byte) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(ed25519.PublicKey(raw))
	if err != nil {
		t.Fatalf("MarshalPKIXPublicKey: %v", err)
	}
	return base64.StdEncoding.EncodeToString(der)
}

func flipBit(b []byte, bit int) []byte {
	c := bytes.Clone(b)
	c[bit/8] ^= 1 << (bit % 8)
	return c
}

func TestVerifyRFC8032(t *testing.T) {
	for _, v := range rfc8032Vectors(t) {
		t.Run(v.name, func(t *testing.T) {
			pub := mustHex(t, v.publicKey)
			sig := mustHex(t, v.signature)

			// The transcription is right: the RFC's seed gives its key and signature.
			priv := ed25519.NewKeyFromSeed(mustHex(t, v.secret))
			if !bytes.Equal(priv.Public().(ed25519.PublicKey), pub) {
				t.Fatal("public key does not match the secret key: vector mistyped")
			}
			if !bytes.Equal(ed25519.Sign(priv, v.message), sig) {
				t.Fatal("signature does not match the secret key: vector mistyped")
			}

			key, err := ParsePublicKey(spkiBase64(t, pub))
			if err != nil {
				t.Fatalf("ParsePublicKey: %v", err)
			}
			challenge := func(key ed25519.PublicKey, msg, sig []byte) *Challenge {
				return &Challenge{DeviceID: "rfc8032", PublicKey: key, Message: string(msg), Signature: sig, Timestamp: 1}
			}
			if !challenge(key, v.message, sig).Verify() {
				t.Fatal("Verify() = false for the RFC's signature")
			}

			for _, bit := range []int{0, 7, 255, 256, 511} {
				if challenge(key, v.message, flipBit(sig, bit)).Verify() {
					t.Errorf("Verify() = true with signature bit %d flipped", bit)
				}
			}
			msgBits := []int{0, 8*len(v.message) - 1}
			if len(v.message) == 0 {
				// Nothing to flip: a one-byte message instead of the empty one.
				if challenge(key, []byte{0}, sig).Verify() {
					t.Error("Verify() = true for a non-empty message")
				}
				msgBits = nil
			}
			for _, bit := range msgBits {
				if challenge(key, flipBit(v.message, bit), sig).Verify() {
					t.Errorf("Verify() = true with message bit %d flipped", bit)
				}
			}
			if challenge(key, append(bytes.Clone(v.message), 0), sig).Verify() {
				t.Error("Verify() = true with a byte appended to the message")
			}
			for _, bit := range []int{0, 100, 254} {
				flipped, err := ParsePublicKey(spkiBase64(t, flipBit(pub, bit)))
				if err != nil {
					// About half the flips leave the curve: such a key is refused.
					wantError(t, err, ErrInvalid, CodeInvalidPublicKey, "publicKey")
					continue
				}
				if challenge(flipped, v.message, sig).Verify() {
					t.Errorf("Verify() = true with public key bit %d flipped", bit)
				}
			}
		})
	}
}

// TestParseChallengeRFC8032 runs the vectors with printable messages through the
// JSON body, as an agent would send them.
func TestParseChallengeRFC8032(t *testing.T) {
	for _, v := range rfc8032Vectors(t) {
		if len(v.message) == 0 || !isPrintableASCII(v.message) {
			continue
		}
		t.Run(v.name, func(t *testing.T) {
			c, err := ParseChallenge(mustJSON(t, map[string]any{
				"deviceId":  "rfc8032",
				"publicKey": spkiBase64(t, mustHex(t, v.publicKey)),
				"message":   string(v.message),
				"signature": base64.RawURLEncoding.EncodeToString(mustHex(t, v.signature)),
				"timestamp": 1,
			}))
			if err != nil {
				t.Fatalf("ParseChallenge: %v", err)
			}
			if !c.Verify() {
				t.Error("Verify() = false")
			}
		})
	}
}

func isPrintableASCII(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}
