package agent

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"testing"

	"filippo.io/edwards25519"
)

// countingCheck makes the registry's full key check count its calls.
func countingCheck(h *harness) *int {
	n := new(int)
	h.reg.validKeys.full = func(k ed25519.PublicKey) (*edwards25519.Point, error) { *n++; return checkedPoint(k) }
	return n
}

// TestKnownKeyNotRevalidated: verify/signature checks an agent's key in full
// (decompression, re-encoding, small order) the first time only; the same key
// again, for any message and deviceId, is answered from memory, and still
// verifies its signatures and refuses bad ones.
func TestKnownKeyNotRevalidated(t *testing.T) {
	h := newHarness(t)
	full := countingCheck(h)
	a := newTestAgent(t, "known", "known-key")
	ctx := context.Background()
	for i := range 5 {
		got, err := h.reg.VerifySignatureRequest(ctx, mustJSON(t, a.fields("message "+strconv.Itoa(i), 1)))
		if err != nil || !got.Verified {
			t.Fatalf("request %d: %+v, %v", i, got, err)
		}
	}
	if *full != 1 {
		t.Errorf("%d full checks of one key over five requests, want 1", *full)
	}
	// A remembered key still fails a signature it did not make.
	f := a.fields("signed", 1)
	f["message"] = "not signed"
	got, err := h.reg.VerifySignatureRequest(ctx, mustJSON(t, f))
	if err != nil || got.Verified {
		t.Errorf("a wrong signature under a remembered key: %+v, %v", got, err)
	}
	// Another key is checked in full.
	b := newTestAgent(t, "other", "other-key")
	if _, err := h.reg.VerifySignatureRequest(ctx, mustJSON(t, b.fields("m", 1))); err != nil {
		t.Fatal(err)
	}
	if *full != 2 {
		t.Errorf("%d full checks after a second key, want 2", *full)
	}
}

// TestLookupKeyNotRevalidated: the key of a lookup by public key is checked in
// full the first time only, and the same key as verify/signature's is not checked
// again; a weak key is refused on every lookup, and never remembered.
func TestLookupKeyNotRevalidated(t *testing.T) {
	h := newHarness(t)
	full := countingCheck(h)
	a := newTestAgent(t, "looked-up", "looked-up-key")
	for i := range 3 {
		key, err := h.reg.ParsePublicKey(spkiBase64(t, a.pub))
		if err != nil || !bytes.Equal(key, a.pub) {
			t.Fatalf("lookup %d: %x, %v", i, key, err)
		}
	}
	if *full != 1 {
		t.Errorf("%d full checks of one key over three lookups, want 1", *full)
	}
	if _, err := h.reg.VerifySignatureRequest(context.Background(), mustJSON(t, a.fields("m", 1))); err != nil {
		t.Fatal(err)
	}
	if *full != 1 {
		t.Errorf("%d full checks of one key after its lookups and a signature check, want 1", *full)
	}
	for _, so := range smallOrderEncodings {
		raw, _ := hex.DecodeString(so.hex)
		for range 2 {
			_, err := h.reg.ParsePublicKey(spkiBase64(t, raw))
			wantError(t, err, ErrInvalid, CodeInvalidPublicKey, "publicKey")
		}
	}
	if want := 1 + 2*len(smallOrderEncodings); *full != want {
		t.Errorf("%d full checks, want %d (every weak key's lookup)", *full, want)
	}
}

// TestWeakKeyNeverRemembered: a key the check refuses is checked, and refused,
// on every request; it never enters the memory of accepted keys.
func TestWeakKeyNeverRemembered(t *testing.T) {
	h := newHarness(t)
	full := countingCheck(h)
	for _, so := range smallOrderEncodings {
		raw, _ := hex.DecodeString(so.hex)
		for pass := range 2 {
			_, err := h.reg.VerifySignatureRequest(context.Background(), mustJSON(t, map[string]any{
				"deviceId": "weak", "publicKey": spkiBase64(t, raw), "message": "pay mallory " + strconv.Itoa(pass),
				"signature": base64.StdEncoding.EncodeToString(identitySignature()), "timestamp": 1,
			}))
			wantError(t, err, ErrInvalid, CodeInvalidPublicKey, "publicKey")
		}
	}
	if want := 2 * len(smallOrderEncodings); *full != want {
		t.Errorf("%d full checks, want %d (every request)", *full, want)
	}
	if n := h.reg.validKeys.size(); n != 0 {
		t.Errorf("%d keys remembered, want 0", n)
	}
	// A Challenge built by other means with a weak key verifies nothing.
	identity, _ := hex.DecodeString(smallOrderEncodings[0].hex)
	c := &Challenge{DeviceID: "weak", PublicKey: identity, Message: "x", Signature: identitySignature(), Timestamp: 1}
	if got, err := h.reg.VerifySignature(context.Background(), c); err != nil || got.Verified {
		t.Errorf("VerifySignature under the identity key: %+v, %v", got, err)
	}
}

// TestValidKeysBounded: the memory holds at most validKeysMax keys, keyed by
// their exact bytes.
func TestValidKeysBounded(t *testing.T) {
	var v validKeys
	calls := 0
	v.full = func(ed25519.PublicKey) (*edwards25519.Point, error) {
		calls++
		return edwards25519.NewIdentityPoint(), nil
	} // the bound, not the check, is under test
	key := make(ed25519.PublicKey, ed25519.PublicKeySize)
	for i := range validKeysMax + 100 {
		key[0], key[1], key[2] = byte(i), byte(i>>8), byte(i>>16)
		if err := v.check(key); err != nil {
			t.Fatal(err)
		}
	}
	if n := v.size(); n != validKeysMax {
		t.Errorf("%d keys remembered, want the bound %d", n, validKeysMax)
	}
	// The last key is remembered by its bytes: a copy is answered from memory,
	// a key differing in one bit is not.
	calls = 0
	if err := v.check(append(ed25519.PublicKey(nil), key...)); err != nil || calls != 0 {
		t.Errorf("the same bytes again: err %v, %d full checks", err, calls)
	}
	key[31] ^= 1
	if err := v.check(key); err != nil || calls != 1 {
		t.Errorf("one bit changed: err %v, %d full checks, want 1", err, calls)
	}
	// A wrong length is refused, whatever the memory.
	if v.check(key[:31]) == nil {
		t.Error("a 31-byte key passed")
	}
}

// TestParseSPKIAsX509: the in-place read of an Ed25519 SPKI answers what
// crypto/x509 answers, for honest keys and for every one-byte change of one
// (which x509 refuses or reads as another key, never silently as this one).
func TestParseSPKIAsX509(t *testing.T) {
	for i := range 32 {
		a := newTestAgent(t, "d", "spki-"+strconv.Itoa(i))
		der, err := x509.MarshalPKIXPublicKey(a.pub)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(der, ed25519SPKIPrefix) || len(der) != 44 {
			t.Fatalf("x509 encodes an Ed25519 SPKI as %x", der)
		}
		got, err := parseSPKI(der)
		if err != nil || !bytes.Equal(got, a.pub) {
			t.Fatalf("parseSPKI = %x, %v; want %x", got, err, a.pub)
		}
		for j := range len(ed25519SPKIPrefix) {
			bad := bytes.Clone(der)
			bad[j] ^= 0x01
			got, err := parseSPKI(bad)
			want, werr := x509.ParsePKIXPublicKey(bad)
			wantKey, isEd := want.(ed25519.PublicKey)
			if (err == nil) != (werr == nil && isEd) || (err == nil && !bytes.Equal(got, wantKey)) {
				t.Errorf("byte %d changed: parseSPKI = %x, %v; x509 = %v, %v", j, got, err, want, werr)
			}
		}
	}
	if _, err := parseSPKI(append(bytes.Clone(ed25519SPKIPrefix), make([]byte, 33)...)); err == nil {
		t.Error("a 33-byte key after the prefix accepted")
	}
}

// TestKnownKeyParsesCheaply: parsing a remembered key costs its base64 decoding
// and nothing more (no crypto/x509 parse, no point decompression).
func TestKnownKeyParsesCheaply(t *testing.T) {
	h := newHarness(t)
	a := newTestAgent(t, "cheap", "cheap-key")
	spki := EncodePublicKey(a.pub)
	if _, err := parsePublicKey(spki, h.reg.validKeys.check); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := parsePublicKey(spki, h.reg.validKeys.check); err != nil {
			t.Fatal(err)
		}
	}); n > 1 {
		t.Errorf("parsing a remembered key allocates %.0f times, want at most 1 (the base64 decoding)", n)
	}
}

// TestParsedPointFollowsTheKey: a parsed Challenge carries its key's point to its
// verification (one key lookup a request), but only while PublicKey still holds
// the key the parse checked: a Challenge whose key is replaced afterwards is
// verified, and checked, under its new key, never with the old key's point.
func TestParsedPointFollowsTheKey(t *testing.T) {
	h := newHarness(t)
	a := newTestAgent(t, "first", "first-key")
	b := newTestAgent(t, "second", "second-key")
	f := a.fields("m", 1)
	f["signature"] = base64.StdEncoding.EncodeToString(ed25519.Sign(b.priv, []byte("m"))) // b signed it
	for name, parse := range map[string]func([]byte) (*Challenge, error){
		"ParseChallenge": ParseChallenge,
		"the registry's parse": func(body []byte) (*Challenge, error) {
			return parseChallenge(body, h.reg.validKeys.point)
		},
	} {
		c, err := parse(mustJSON(t, f))
		if err != nil {
			t.Fatal(err)
		}
		if c.Verify() || c.verify(h.reg.validKeys.point) {
			t.Fatalf("%s: b's signature verified under a's key", name)
		}
		c.PublicKey = bytes.Clone(b.pub)
		if !c.Verify() || !c.verify(h.reg.validKeys.point) {
			t.Errorf("%s: after the key is replaced by b's, b's signature does not verify (the old key's point used)", name)
		}
		copy(c.PublicKey, a.pub) // in place
		if c.Verify() || c.verify(h.reg.validKeys.point) {
			t.Errorf("%s: b's signature verified under a's key again", name)
		}
	}
}
