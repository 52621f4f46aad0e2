package oidc

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/argon2"

	"github.com/palmgate/palmgate/storage/memstore"
)

// cheapArgon2 encodes secret with the cheapest accepted argon2id parameters, so
// that tests stay fast.
func cheapArgon2(secret string) string {
	salt := []byte("0123456789abcdef")
	key := argon2.IDKey([]byte(secret), salt, 1, 8, 1, 32)
	return fmt.Sprintf("$argon2id$v=19$m=8,t=1,p=1$%s$%s",
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key))
}

func sha256Form(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestParseSecretHash(t *testing.T) {
	good, err := HashSecret("s3cret", "argon2id")
	if err != nil {
		t.Fatal(err)
	}
	const salt, key = "c2FsdHNhbHRzYWx0c2FsdA", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY"
	for _, tc := range []struct {
		name, encoded string
		ok            bool
	}{
		{"sha256", sha256Form("s3cret"), true},
		{"bare hex without the prefix", sha256Form("s3cret")[7:], false},
		{"sha256 prefixed upper-case hex", "sha256:" + strings.ToUpper(sha256Form("s3cret")[7:]), true},
		{"sha256 short", "sha256:abcd", false},
		{"sha256 not hex", "sha256:" + strings.Repeat("z", 64), false},
		{"argon2id from HashSecret", good, true},
		{"argon2id of caddy hash-password", "$argon2id$v=19$m=47104,t=1,p=1$P2nzckEdTZ3bxCiBCkRTyA$xQL3Z32eo5jKl7u5tcIsnEKObYiyNZQQf5/4sAau6Pg", true},
		{"argon2id cheapest", "$argon2id$v=19$m=8,t=1,p=1$" + salt + "$" + key, true},
		{"argon2i", "$argon2i$v=19$m=8,t=1,p=1$" + salt + "$" + key, false},
		{"version 16", "$argon2id$v=16$m=8,t=1,p=1$" + salt + "$" + key, false},
		{"memory over 256 MiB", "$argon2id$v=19$m=262145,t=1,p=1$" + salt + "$" + key, false},
		{"memory under 8*p", "$argon2id$v=19$m=15,t=1,p=2$" + salt + "$" + key, false},
		{"no iterations", "$argon2id$v=19$m=8,t=0,p=1$" + salt + "$" + key, false},
		{"17 iterations", "$argon2id$v=19$m=8,t=17,p=1$" + salt + "$" + key, false},
		{"no threads", "$argon2id$v=19$m=8,t=1,p=0$" + salt + "$" + key, false},
		{"parameters reordered", "$argon2id$v=19$t=1,m=8,p=1$" + salt + "$" + key, false},
		{"signed parameter", "$argon2id$v=19$m=+8,t=1,p=1$" + salt + "$" + key, false},
		{"padded salt", "$argon2id$v=19$m=8,t=1,p=1$" + salt + "==$" + key, false},
		{"short salt", "$argon2id$v=19$m=8,t=1,p=1$c2FsdA$" + key, false},
		{"short hash", "$argon2id$v=19$m=8,t=1,p=1$" + salt + "$MDEyMzQ1Njc", false},
		{"extra field", "$argon2id$v=19$m=8,t=1,p=1$" + salt + "$" + key + "$x", false},
		{"clear secret", "s3cret", false},
		{"bcrypt", "$2a$14$ajq8Q7fbtFRQvXpdCq7Jcuy.Rx1h/L4J60Otx.gyNLbAYctGMJ9tK", false},
		{"empty", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ParseSecretHash(tc.encoded)
			if (err == nil) != tc.ok {
				t.Errorf("ParseSecretHash(%q) = %v, want ok %v", tc.encoded, err, tc.ok)
			}
		})
	}
}

func TestHashSecret(t *testing.T) {
	for _, alg := range []string{"argon2id", "sha256"} {
		enc, err := HashSecret("correct horse", alg)
		if err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
		h, err := parseSecretHash(enc)
		if err != nil {
			t.Fatalf("%s: HashSecret made %q, which does not parse: %v", alg, enc, err)
		}
		v := newVerifier(make([]byte, 32))
		if !v.check("c", h, "correct horse") || v.check("c", h, "correct horse ") {
			t.Errorf("%s: %q does not verify exactly its secret", alg, enc)
		}
	}
	if a, _ := HashSecret("x", "argon2id"); a == func() string { b, _ := HashSecret("x", "argon2id"); return b }() {
		t.Error("two argon2id hashes of one secret are equal: no random salt")
	}
	if _, err := HashSecret("x", "md5"); err == nil {
		t.Error("HashSecret accepted algorithm md5")
	}
}

// TestAuthenticateClientSecretHash: clients configured with secret_hash
// authenticate with their secret; an argon2id verification is paid once per
// distinct secret, failures are never remembered (issue 9, finding 9).
func TestAuthenticateClientSecretHash(t *testing.T) {
	c, err := newClients(context.Background(), Config{Store: memstore.New(), Clients: []Client{
		{ID: "fast", SecretHash: sha256Form("fast-secret")},
		{ID: "slow", SecretHash: cheapArgon2("slow-secret")},
		{ID: "clear", Secret: "clear-secret"},
	}}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id, secret string
		ok         bool
	}{
		{"fast", "fast-secret", true},
		{"fast", "fast-secret-x", false},
		{"fast", sha256Form("fast-secret"), false}, // the hash is no password
		{"fast", "", false},
		{"slow", "slow-secret", true},
		{"slow", "slow-secret", true},
		{"slow", "slow-secreT", false},
		{"slow", cheapArgon2("slow-secret"), false},
		{"slow", "", false},
		{"slow", "fast-secret", false},
		{"clear", "clear-secret", true},
		{"clear", "slow-secret", false},
		{"nobody", "slow-secret", false},
	} {
		if got := c.authenticateStatic(tc.id, tc.secret) != nil; got != tc.ok {
			t.Errorf("authenticate(%q, %q) = %v, want %v", tc.id, tc.secret, got, tc.ok)
		}
	}
	// Two right answers of "slow" and four wrong ones: one argon2id computation for
	// the right secret, one per wrong attempt; only the right one is remembered.
	if n := c.verifier.computed.Load(); n != 5 {
		t.Errorf("%d argon2id computations, want 5 (the right secret once, each wrong one)", n)
	}
	if n := c.verifier.cached(); n != 1 {
		t.Errorf("%d remembered verifications, want 1", n)
	}
	for range 10 {
		if c.authenticateStatic("slow", "slow-secret") == nil {
			t.Fatal("remembered secret refused")
		}
	}
	if n := c.verifier.computed.Load(); n != 5 {
		t.Errorf("%d argon2id computations after 10 more right answers, want still 5", n)
	}

	t.Run("both secret and secret_hash", func(t *testing.T) {
		if _, err := newClients(context.Background(), Config{Store: memstore.New(), Clients: []Client{{ID: "x", Secret: "s", SecretHash: sha256Form("s")}}}, time.Now); err == nil {
			t.Error("a client with secret and secret_hash was accepted")
		}
	})
	t.Run("bad secret_hash", func(t *testing.T) {
		_, err := newClients(context.Background(), Config{Store: memstore.New(), Clients: []Client{{ID: "x", SecretHash: "s3cret"}}}, time.Now)
		if err == nil || !strings.Contains(err.Error(), "secret_hash") {
			t.Errorf("newClients = %v, want an error naming secret_hash", err)
		}
	})
}

// TestVerifiedCacheBounded: the cache of argon2id verifications never holds more
// than maxVerified entries.
func TestVerifiedCacheBounded(t *testing.T) {
	h, err := parseSecretHash(cheapArgon2("s"))
	if err != nil {
		t.Fatal(err)
	}
	v := newVerifier(make([]byte, 32))
	for i := range maxVerified + 100 {
		if !v.check(fmt.Sprint("client-", i), h, "s") {
			t.Fatal("right secret refused")
		}
		if n := v.cached(); n > maxVerified {
			t.Fatalf("%d cached verifications, bound %d", n, maxVerified)
		}
	}
}
