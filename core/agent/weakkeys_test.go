package agent

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"math/big"
	"strconv"
	"testing"

	"filippo.io/edwards25519"

	"github.com/palmgate/palmgate/storage"
)

// smallOrderEncodings are the encodings of edwards25519's eight points of small
// order: the eight canonical ones and the six non-canonical ones (y >= p, or x = 0
// with the sign bit set), as listed by "Taming the many EdDSAs" (Chalkias et al.,
// 2020) and the ed25519-speccheck and C2SP/CCTV vectors. testSmallOrderTable
// checks the transcription.
var smallOrderEncodings = []struct {
	name, hex string
	canonical bool
}{
	{"identity (order 1)", "0100000000000000000000000000000000000000000000000000000000000000", true},
	{"y=-1 (order 2)", "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", true},
	{"y=0 (order 4)", "0000000000000000000000000000000000000000000000000000000000000000", true},
	{"y=0, x negative (order 4)", "0000000000000000000000000000000000000000000000000000000000000080", true},
	{"order 8 (a)", "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a", true},
	{"order 8 (a), x negative", "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa", true},
	{"order 8 (b)", "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05", true},
	{"order 8 (b), x negative", "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85", true},
	{"identity, x=-0", "0100000000000000000000000000000000000000000000000000000000000080", false},
	{"identity, y=p+1", "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", false},
	{"identity, y=p+1, x=-0", "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", false},
	{"y=-1, x=-0", "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", false},
	{"y=0 as y=p", "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", false},
	{"y=0 as y=p, x negative", "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", false},
}

// fieldP is 2^255 - 19.
var fieldP = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))

// groupL is the order of the prime-order subgroup, 2^252 + 27742317777372353535851937790883648493.
var groupL, _ = new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)

// littleEndian32 encodes n (below 2^256) as 32 little-endian bytes.
func littleEndian32(n *big.Int) []byte {
	b := n.FillBytes(make([]byte, 32))
	for i, j := 0, 31; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return b
}

func TestSmallOrderTable(t *testing.T) {
	seen := map[string]bool{} // canonical re-encodings: the eight points
	for _, tt := range smallOrderEncodings {
		raw, err := hex.DecodeString(tt.hex)
		if err != nil || len(raw) != 32 {
			t.Fatalf("%s: bad hex", tt.name)
		}
		p, err := new(edwards25519.Point).SetBytes(raw)
		if err != nil {
			t.Fatalf("%s: not a point: %v", tt.name, err)
		}
		if new(edwards25519.Point).MultByCofactor(p).Equal(edwards25519.NewIdentityPoint()) != 1 {
			t.Errorf("%s: [8]P is not the identity", tt.name)
		}
		if got := bytes.Equal(p.Bytes(), raw); got != tt.canonical {
			t.Errorf("%s: canonical = %v, want %v", tt.name, got, tt.canonical)
		}
		seen[hex.EncodeToString(p.Bytes())] = true
	}
	if len(seen) != 8 {
		t.Errorf("the table names %d distinct points, want the 8 of small order", len(seen))
	}
}

// nonCanonicalLargeOrder returns the encodings y + p (for y < 19) that decode to
// points of large order: a key other implementations may read as another key.
func nonCanonicalLargeOrder(t *testing.T) [][]byte {
	t.Helper()
	var out [][]byte
	for y := int64(0); y < 19; y++ {
		for _, sign := range []byte{0, 0x80} {
			raw := littleEndian32(new(big.Int).Add(fieldP, big.NewInt(y)))
			raw[31] |= sign
			p, err := new(edwards25519.Point).SetBytes(raw)
			if err != nil || new(edwards25519.Point).MultByCofactor(p).Equal(edwards25519.NewIdentityPoint()) == 1 {
				continue
			}
			out = append(out, raw)
		}
	}
	if len(out) == 0 {
		t.Fatal("found no non-canonical encoding of a point of large order")
	}
	return out
}

func TestParsePublicKeyRefusesWeakKeys(t *testing.T) {
	type keyCase struct {
		name string
		raw  []byte
	}
	var cases []keyCase
	for _, so := range smallOrderEncodings {
		raw, _ := hex.DecodeString(so.hex)
		cases = append(cases, keyCase{"small order: " + so.name, raw})
	}
	for _, raw := range nonCanonicalLargeOrder(t) {
		cases = append(cases, keyCase{"non-canonical y: " + hex.EncodeToString(raw), raw})
	}
	offCurve := littleEndian32(big.NewInt(2)) // y = 2 is not on the curve
	if _, err := new(edwards25519.Point).SetBytes(offCurve); err == nil {
		t.Fatal("y=2 decodes; pick another off-curve key")
	}
	cases = append(cases, keyCase{"not a point (y=2)", offCurve})
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePublicKey(spkiBase64(t, tt.raw))
			wantError(t, err, ErrInvalid, CodeInvalidPublicKey, "publicKey")
			// A forged signature for an AgentChallenge: R = identity, S = 0.
			sig := make([]byte, 64)
			sig[0] = 1
			_, err = ParseChallenge(mustJSON(t, map[string]any{
				"deviceId": "weak", "publicKey": spkiBase64(t, tt.raw), "message": "anything",
				"signature": base64.StdEncoding.EncodeToString(sig), "timestamp": 1,
			}))
			wantError(t, err, ErrInvalid, CodeInvalidPublicKey, "publicKey")
		})
	}
	// Honest keys still parse.
	for i := range 64 {
		a := newTestAgent(t, "d", "honest-"+strconv.Itoa(i))
		if _, err := ParsePublicKey(EncodePublicKey(a.pub)); err != nil {
			t.Fatalf("honest key %d refused: %v", i, err)
		}
	}
}

// identitySignature is R = identity, S = 0: valid by the verification equation
// for every message under the identity key.
func identitySignature() []byte {
	sig := make([]byte, ed25519.SignatureSize)
	sig[0] = 1
	return sig
}

func TestVerifySignatures(t *testing.T) {
	a := newTestAgent(t, "agent", "signatures")
	msg := "hello"
	good := ed25519.Sign(a.priv, []byte(msg))
	// S + L: the same signature by the equation, but S is not reduced.
	s := new(big.Int).SetBytes(reverse(good[32:]))
	sPlusL := append(bytes.Clone(good[:32]), littleEndian32(new(big.Int).Add(s, groupL))...)
	sIsL := append(bytes.Clone(good[:32]), littleEndian32(groupL)...)
	identity, _ := hex.DecodeString(smallOrderEncodings[0].hex)
	tests := []struct {
		name string
		key  []byte
		sig  []byte
		want bool
	}{
		{"valid", a.pub, good, true},
		{"S >= L (S + L)", a.pub, sPlusL, false},
		{"S = L", a.pub, sIsL, false},
		{"R flipped", a.pub, flipBit(good, 3), false},
		{"S flipped", a.pub, flipBit(good, 300), false},
		{"identity key, R = identity, S = 0", identity, identitySignature(), false},
	}
	for _, so := range smallOrderEncodings[1:] {
		raw, _ := hex.DecodeString(so.hex)
		// R = identity, S = 0 verifies under a small-order key A whenever [k]A is
		// the identity, for about one message in A's order.
		tests = append(tests, struct {
			name string
			key  []byte
			sig  []byte
			want bool
		}{"small-order key " + so.name + ", R = identity, S = 0", raw, identitySignature(), false})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Several messages: under a key of order 2, half of them would verify.
			for i := range 16 {
				m := msg
				if i > 0 {
					m = msg + strconv.Itoa(i)
				}
				if i > 0 && tt.want {
					break // the valid signature is for msg only
				}
				c := &Challenge{DeviceID: "agent", PublicKey: tt.key, Message: m, Signature: tt.sig, Timestamp: 1}
				if got := c.Verify(); got != tt.want {
					t.Fatalf("Verify(%q) = %v, want %v", m, got, tt.want)
				}
			}
		})
	}
}

func reverse(b []byte) []byte {
	c := bytes.Clone(b)
	for i, j := 0, len(c)-1; i < j; i, j = i+1, j-1 {
		c[i], c[j] = c[j], c[i]
	}
	return c
}

// TestInitRefusesIdentityKey is the attack of issue 9: a registration by the
// identity key with R = identity, S = 0, which then "verifies" any message.
func TestInitRefusesIdentityKey(t *testing.T) {
	h := newHarness(t)
	identity, _ := hex.DecodeString(smallOrderEncodings[0].hex)
	ts := h.clock.Now().UnixMilli()
	body := mustJSON(t, map[string]any{
		"deviceId": "forger", "publicKey": spkiBase64(t, identity),
		"message":   "agent-register-" + strconv.FormatInt(ts, 10),
		"signature": base64.StdEncoding.EncodeToString(identitySignature()), "timestamp": ts,
	})
	c, err := ParseChallenge(body)
	if err == nil {
		_, err = h.reg.Init(context.Background(), c, "")
	}
	wantError(t, err, ErrInvalid, CodeInvalidPublicKey, "publicKey")
	if n := countRecords(t, h.store); n != 0 {
		t.Errorf("a refused registration left %d records", n)
	}
}

// TestWeakKeySessionFails: a registration session opened with a weak key before
// keys were checked ends failed when its owner scans, and registers nothing.
func TestWeakKeySessionFails(t *testing.T) {
	h := newHarness(t)
	a := newTestAgent(t, "old-session", "old-session")
	s := h.init(t, a)
	identity, _ := hex.DecodeString(smallOrderEncodings[0].hex)
	err := h.store.Update(context.Background(), func(txn storage.Txn) error {
		stored, err := getSession(txn, s.ID)
		if err != nil {
			return err
		}
		stored.PublicKey = spkiBase64(t, identity)
		return h.reg.putSession(txn, stored)
	})
	if err != nil {
		t.Fatal(err)
	}
	h.scan(t, s, "alice")
	if got := h.session(t, s.ID); got.Status != SessionFailed {
		t.Errorf("session status %q, want %q", got.Status, SessionFailed)
	}
	if l := h.lookupDevice(t, "old-session"); l.Registered {
		t.Errorf("the weak key was registered: %+v", l)
	}
}

func countRecords(t *testing.T, store storage.Store) int {
	t.Helper()
	var n int
	err := store.View(context.Background(), func(txn storage.Txn) error {
		return txn.Iterate(nil, func(_, _ []byte) (bool, error) {
			n++
			return true, nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestVerifySignatureWeakKeyRegisteredBefore: a weak key registered before keys
// were checked is refused at parse time, before the store or the remembered
// keys are asked, and a Challenge built around it never verifies.
func TestVerifySignatureWeakKeyRegisteredBefore(t *testing.T) {
	h := newHarness(t)
	identity, _ := hex.DecodeString(smallOrderEncodings[0].hex)
	err := h.store.Update(context.Background(), func(txn storage.Txn) error {
		return register(txn, "forger", identity, Registered{
			PublicKey: spkiBase64(t, identity), HumanID: "00000000-0000-4000-8000-000000000000", RegisteredAt: Time(h.clock.Now()),
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for pass := range 2 { // the second pass would find the key remembered
		_, err := ParseChallenge(mustJSON(t, map[string]any{
			"deviceId": "forger", "publicKey": spkiBase64(t, identity), "message": "pay mallory " + strconv.Itoa(pass),
			"signature": base64.StdEncoding.EncodeToString(identitySignature()), "timestamp": 1,
		}))
		wantError(t, err, ErrInvalid, CodeInvalidPublicKey, "publicKey")
		c := &Challenge{DeviceID: "forger", PublicKey: identity, Message: "pay mallory", Signature: identitySignature(), Timestamp: 1}
		got, err := h.reg.VerifySignature(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		if got.Verified {
			t.Errorf("pass %d: VerifySignature = %+v, want verified false", pass, got)
		}
	}
}

// TestAgentKeyWeakKeyRegisteredBefore: the key of an agent registered with a weak
// key before keys were checked is not handed to the jwt-bearer grant (nor to
// requested_actor): AgentKey answers as for no agent, while a sound key is.
func TestAgentKeyWeakKeyRegisteredBefore(t *testing.T) {
	h := newHarness(t)
	human := "00000000-0000-4000-8000-000000000000"
	sound, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]ed25519.PublicKey{"sound": sound}
	for _, so := range smallOrderEncodings[:8] { // the canonical ones: SPKI-encodable as registered
		raw, _ := hex.DecodeString(so.hex)
		keys["weak "+so.name] = raw
	}
	for id, key := range keys {
		err := h.store.Update(context.Background(), func(txn storage.Txn) error {
			return register(txn, id, key, Registered{PublicKey: spkiBase64(t, key), HumanID: human, RegisteredAt: Time(h.clock.Now())})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for id, want := range keys {
		for pass := range 2 { // the second pass finds the agent and a sound key remembered
			key, owner, err := h.reg.AgentKey(context.Background(), id)
			if err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			if id == "sound" {
				if !bytes.Equal(key, want) || owner != human {
					t.Errorf("pass %d: AgentKey(sound) = %x, %q; want its key and owner", pass, key, owner)
				}
			} else if key != nil || owner != "" {
				t.Errorf("pass %d: AgentKey(%s) = %x, %q; want no agent", pass, id, key, owner)
			}
		}
	}
}
