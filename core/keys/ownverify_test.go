package keys

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/fips140"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"math/big"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// ownTestKey is a fixed-size P-256 key and its OwnES256Key.
func ownTestKey(t testing.TB) (*ecdsa.PrivateKey, *OwnES256Key) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	own, err := newOwnES256Key(priv)
	if err != nil {
		t.Fatal(err)
	}
	return priv, own
}

// rs is r || s, 32 bytes each (values of up to 32 bytes).
func rs(r, s *big.Int) []byte {
	sig := make([]byte, ES256SignatureSize)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return sig
}

// stdVerify is what golang-jwt's ES256 does with a public key.
func stdVerify(pub *ecdsa.PublicKey, hash, sig []byte) bool {
	return len(sig) == ES256SignatureSize &&
		ecdsa.Verify(pub, hash, new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:]))
}

// TestOwnES256MatchesECDSA: the shortcut accepts what ecdsa.Verify accepts and
// refuses what it refuses, for valid signatures (in both s forms), altered ones,
// out-of-range r and s, another key's, and the one input that makes the sum the
// point at infinity.
func TestOwnES256MatchesECDSA(t *testing.T) {
	priv, own := ownTestKey(t)
	other, _ := ownTestKey(t)
	n := p256N
	for i := range 50 {
		hash := sha256.Sum256([]byte{byte(i), 'm'})
		r, s, err := ecdsa.Sign(rand.Reader, priv, hash[:])
		if err != nil {
			t.Fatal(err)
		}
		otherR, otherS, _ := ecdsa.Sign(rand.Reader, other, hash[:])
		one := big.NewInt(1)
		cases := map[string][]byte{
			"valid":             rs(r, s),
			"valid, other s":    rs(r, new(big.Int).Sub(n, s)),
			"s + 1":             rs(r, new(big.Int).Add(s, one).Mod(new(big.Int).Add(s, one), n)),
			"r + 1":             rs(new(big.Int).Add(r, one).Mod(new(big.Int).Add(r, one), n), s),
			"r = 0":             rs(new(big.Int), s),
			"s = 0":             rs(r, new(big.Int)),
			"r = n":             rs(n, s),
			"s = n":             rs(r, n),
			"r + n (overflows)": append(new(big.Int).Add(r, n).Bytes(), s.FillBytes(make([]byte, 32))...),
			"another key's":     rs(otherR, otherS),
			"short":             rs(r, s)[:63],
		}
		if r.Cmp(new(big.Int).Sub(new(big.Int).Lsh(one, 256), n)) < 0 {
			cases["r + n"] = rs(new(big.Int).Add(r, n), s)
		}
		for name, sig := range cases {
			want := stdVerify(&priv.PublicKey, hash[:], sig)
			if got := own.verify(hash[:], sig); got != want {
				t.Fatalf("%s (message %d): own %v, ecdsa.Verify %v", name, i, got, want)
			}
			if name == "valid" || name == "valid, other s" {
				if !want {
					t.Fatalf("%s (message %d): ecdsa.Verify refused it", name, i)
				}
			}
		}
		otherHash := sha256.Sum256([]byte{byte(i), 'x'})
		if own.verify(otherHash[:], rs(r, s)) {
			t.Fatalf("message %d: a signature of another hash verified", i)
		}
	}

	// e = -r·d (mod n) makes s⁻¹·(e + r·d) zero: u1·G + u2·Q is the point at
	// infinity, which ecdsa.Verify refuses.
	r, s := big.NewInt(12345), big.NewInt(67890)
	e := new(big.Int).Mul(r, priv.D)
	e.Neg(e).Mod(e, n)
	hash := e.FillBytes(make([]byte, 32))
	if stdVerify(&priv.PublicKey, hash, rs(r, s)) || own.verify(hash, rs(r, s)) {
		t.Fatal("the point at infinity verified")
	}
}

// FuzzOwnES256MatchesECDSA: for any hash and signature, the shortcut and
// ecdsa.Verify agree. The seeds include valid signatures, so that mutations
// explore near them.
func FuzzOwnES256MatchesECDSA(f *testing.F) {
	priv, own := ownTestKey(f)
	for i := range 4 {
		hash := sha256.Sum256([]byte{byte(i)})
		r, s, err := ecdsa.Sign(rand.Reader, priv, hash[:])
		if err != nil {
			f.Fatal(err)
		}
		f.Add(hash[:], rs(r, s))
	}
	f.Add(make([]byte, 32), make([]byte, 64))
	f.Fuzz(func(t *testing.T, hash, sig []byte) {
		if len(hash) != 32 { // SHA-256, the only hash of ES256
			return
		}
		if got, want := own.verify(hash, sig), stdVerify(&priv.PublicKey, hash, sig); got != want {
			t.Fatalf("own %v, ecdsa.Verify %v", got, want)
		}
	})
}

// TestOwnES256Method: golang-jwt's ES256 verification through OwnES256 with an
// OwnES256Key, and golang-jwt's own ES256 refusing that key type (what makes a
// token whose method was not switched fail rather than go unchecked).
func TestOwnES256Method(t *testing.T) {
	priv, own := ownTestKey(t)
	const signing = "header.claims"
	sig, err := jwt.SigningMethodES256.Sign(signing, priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := OwnES256.Verify(signing, sig, own); err != nil {
		t.Fatalf("own key: %v", err)
	}
	if err := OwnES256.Verify(signing, sig, &priv.PublicKey); err != nil {
		t.Fatalf("public key: %v", err)
	}
	if err := OwnES256.Verify(signing+"x", sig, own); !errors.Is(err, jwt.ErrECDSAVerification) {
		t.Fatalf("altered: %v, want ErrECDSAVerification", err)
	}
	if err := jwt.SigningMethodES256.Verify(signing, sig, own); !errors.Is(err, jwt.ErrInvalidKeyType) {
		t.Fatalf("golang-jwt's ES256 with an OwnES256Key: %v, want ErrInvalidKeyType", err)
	}
	if _, err := OwnES256.Sign(signing, priv); err == nil {
		t.Fatal("OwnES256 signed")
	}
}

// TestOwnES256ConcurrentVerify: one key verifies for many requests at once (d is
// only read); run with -race.
func TestOwnES256ConcurrentVerify(t *testing.T) {
	priv, own := ownTestKey(t)
	hash := sha256.Sum256([]byte("m"))
	r, s, err := ecdsa.Sign(rand.Reader, priv, hash[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := rs(r, s)
	var wg sync.WaitGroup
	var refused atomic.Int32
	for range 8 {
		wg.Go(func() {
			for range 20 {
				if !own.verify(hash[:], sig) {
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := refused.Load(); n != 0 {
		t.Fatalf("%d of 160 concurrent verifications refused a valid signature", n)
	}
}

// TestOwnES256KeyRefusesAMismatchedKey: the shortcut is exact only when Q = d·G.
func TestOwnES256KeyRefusesAMismatchedKey(t *testing.T) {
	a, _ := ownTestKey(t)
	b, _ := ownTestKey(t)
	mixed := &ecdsa.PrivateKey{PublicKey: b.PublicKey, D: a.D}
	if _, err := newOwnES256Key(mixed); err == nil {
		t.Fatal("a private key with another key's public half was accepted")
	}
}

// BenchmarkVerifyES256 compares ecdsa.Verify with the shortcut.
//
//	go test -run '^$' -bench BenchmarkVerifyES256 -count 4 ./core/keys
func BenchmarkVerifyES256(b *testing.B) {
	priv, own := ownTestKey(b)
	hash := sha256.Sum256([]byte("m"))
	r, s, err := ecdsa.Sign(rand.Reader, priv, hash[:])
	if err != nil {
		b.Fatal(err)
	}
	sig := rs(r, s)
	b.Run("ecdsa", func(b *testing.B) {
		for b.Loop() {
			if !stdVerify(&priv.PublicKey, hash[:], sig) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("own", func(b *testing.B) {
		for b.Loop() {
			if !own.verify(hash[:], sig) {
				b.Fatal("refused")
			}
		}
	})
}

// TestOwnES256OffInFIPSMode: in FIPS 140-3 mode (GODEBUG=fips140=on) the set hands
// out the ES256 public key, so that every verification goes through crypto/ecdsa;
// otherwise the OwnES256Key. The FIPS half runs in a child process of this test
// binary, as the mode is fixed when a process starts.
func TestOwnES256OffInFIPSMode(t *testing.T) {
	ctx := context.Background()
	s := openSet(t, openStore(t, t.TempDir()))
	key, _, err := s.Key(ctx, s.Active(ES256).ID)
	if err != nil {
		t.Fatal(err)
	}
	_, own := key.(*OwnES256Key)
	if os.Getenv("PALMGATE_FIPS_CHILD") == "1" {
		if !fips140.Enabled() {
			t.Fatal("the child is not in FIPS 140-3 mode")
		}
		if own {
			t.Fatal("in FIPS 140-3 mode the set handed out an OwnES256Key")
		}
		return
	}
	if fips140.Enabled() { // the whole test run is in FIPS mode: the child would repeat this
		if own {
			t.Fatal("in FIPS 140-3 mode the set handed out an OwnES256Key")
		}
		return
	}
	if !own {
		t.Fatalf("Key = %T, want *OwnES256Key", key)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOwnES256OffInFIPSMode$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "GODEBUG=fips140=on", "PALMGATE_FIPS_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestOwnES256OffInFIPSMode") {
		t.Fatalf("the FIPS 140-3 child: %v\n%s", err, out)
	}
}
