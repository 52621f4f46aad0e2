// Package keystest hands tests signing keys without the cost of generating RSA
// ones: a 2048-bit RSA key takes 50 ms to seconds of CPU on a loaded machine, and
// every keys.Set generates one on a fresh store. Pass Generator to keys.Open (as
// keys.WithGenerator(keystest.Generator)). The keys are public test fixtures:
// never use them outside tests.
package keystest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	_ "embed"
	"encoding/pem"
	"fmt"
	"sync"
	"sync/atomic"
)

// rsaPEM holds 16 RSA 2048-bit private keys (PKCS#8), made once with
// `openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048`.
//
//go:embed rsa2048.pem
var rsaPEM []byte

var (
	parseOnce sync.Once
	rsaKeys   []*rsa.PrivateKey
	parseErr  error
	next      atomic.Uint64
)

// RSAKeys returns the fixed RSA keys, parsed once.
func RSAKeys() ([]*rsa.PrivateKey, error) {
	parseOnce.Do(func() {
		rest := rsaPEM
		for {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				break
			}
			k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil {
				parseErr = fmt.Errorf("keystest: parsing key %d: %w", len(rsaKeys), err)
				return
			}
			rk, ok := k.(*rsa.PrivateKey)
			if !ok {
				parseErr = fmt.Errorf("keystest: key %d is %T, want RSA", len(rsaKeys), k)
				return
			}
			rsaKeys = append(rsaKeys, rk)
		}
		if len(rsaKeys) == 0 {
			parseErr = fmt.Errorf("keystest: no key in rsa2048.pem")
		}
	})
	return rsaKeys, parseErr
}

// Generator makes a key for alg ("RS256", "ES256" or "EdDSA"), with keys.Generator's
// signature. RS256 keys come from the fixed set in turn, shared by the whole test
// process: two keys handed out in a row always differ, and a key comes back only
// after all the others did. ES256 and EdDSA keys are generated (they are cheap).
func Generator(alg string) (crypto.Signer, error) {
	switch alg {
	case "RS256":
		ks, err := RSAKeys()
		if err != nil {
			return nil, err
		}
		return ks[(next.Add(1)-1)%uint64(len(ks))], nil
	case "ES256":
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "EdDSA":
		_, k, err := ed25519.GenerateKey(rand.Reader)
		return k, err
	}
	return nil, fmt.Errorf("keystest: unsupported signing algorithm %q", alg)
}
