package keystest

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"testing"
)

// TestGenerator: the fixed RSA keys are valid 2048-bit keys, all different, handed
// out in turn; the other algorithms get keys of their type.
func TestGenerator(t *testing.T) {
	ks, err := RSAKeys()
	if err != nil {
		t.Fatal(err)
	}
	if len(ks) != 16 {
		t.Errorf("%d fixed RSA keys, want 16", len(ks))
	}
	seen := map[string]bool{}
	for i, k := range ks {
		if err := k.Validate(); err != nil {
			t.Errorf("key %d: %v", i, err)
		}
		if k.N.BitLen() != 2048 {
			t.Errorf("key %d has %d bits, want 2048", i, k.N.BitLen())
		}
		if seen[k.N.String()] {
			t.Errorf("key %d repeats an earlier one", i)
		}
		seen[k.N.String()] = true
	}
	a, err := Generator("RS256")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Generator("RS256")
	if a.(*rsa.PrivateKey).Equal(b) {
		t.Error("two RS256 keys in a row are equal")
	}
	if k, err := Generator("ES256"); err != nil {
		t.Error(err)
	} else if _, ok := k.(*ecdsa.PrivateKey); !ok {
		t.Errorf("ES256 key is %T", k)
	}
	if k, err := Generator("EdDSA"); err != nil {
		t.Error(err)
	} else if _, ok := k.(ed25519.PrivateKey); !ok {
		t.Errorf("EdDSA key is %T", k)
	}
	if _, err := Generator("HS256"); err == nil {
		t.Error("Generator(HS256) did not fail")
	}
}
