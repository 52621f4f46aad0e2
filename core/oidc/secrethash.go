package oidc

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/crypto/argon2"
)

// The accepted forms of a client's secret_hash:
//
//	sha256:<64 hex digits>      SHA-256 of the secret (for long random secrets only)
//	$argon2id$v=19$m=<KiB>,t=<iterations>,p=<threads>$<salt>$<hash>
//
// The argon2id form is the PHC string `caddy hash-password --algorithm argon2id` and
// `caddy palmgate hash-secret` print: salt and hash in unpadded standard base64.
const (
	sha256Prefix  = "sha256:"
	argon2Prefix  = "$argon2id$"
	argon2MaxMem  = 256 * 1024 // KiB: one verification uses at most 256 MiB
	argon2MaxTime = 16
	argon2MaxP    = 16
)

// Argon2id parameters `caddy palmgate hash-secret` uses: Caddy's hash-password
// defaults (OWASP's first recommendation), about 50 ms and 46 MiB per hash.
const (
	Argon2Memory  = 46 * 1024
	Argon2Time    = 1
	Argon2Threads = 1
	argon2SaltLen = 16
	argon2KeyLen  = 32
)

// secretHash is a parsed secret_hash.
type secretHash struct {
	sha256 []byte // set for the sha256 form
	// argon2id form:
	salt, key    []byte
	memory, time uint32
	threads      uint8
}

// ParseSecretHash checks an encoded secret hash (see the accepted forms above) and
// says what is wrong with it.
func ParseSecretHash(encoded string) error {
	_, err := parseSecretHash(encoded)
	return err
}

func parseSecretHash(encoded string) (*secretHash, error) {
	if hexDigest, ok := strings.CutPrefix(encoded, sha256Prefix); ok {
		sum, err := hex.DecodeString(hexDigest)
		if err != nil || len(sum) != sha256.Size {
			return nil, errors.New("sha256: form needs 64 hex digits after the prefix")
		}
		return &secretHash{sha256: sum}, nil
	}
	rest, ok := strings.CutPrefix(encoded, argon2Prefix)
	if !ok {
		return nil, errors.New(`not a supported hash: want "sha256:<64 hex digits>" or "$argon2id$v=19$m=<KiB>,t=<n>,p=<n>$<salt>$<hash>"`)
	}
	parts := strings.Split(rest, "$")
	if len(parts) != 4 || parts[0] != "v=19" {
		return nil, errors.New("argon2id: want $argon2id$v=19$m=<KiB>,t=<n>,p=<n>$<salt>$<hash>")
	}
	params := strings.Split(parts[1], ",")
	if len(params) != 3 {
		return nil, errors.New("argon2id: parameters must be m=<KiB>,t=<iterations>,p=<threads>")
	}
	var vals [3]uint64
	for i, name := range []string{"m=", "t=", "p="} {
		v, ok := strings.CutPrefix(params[i], name)
		n, err := strconv.ParseUint(v, 10, 32)
		if !ok || err != nil {
			return nil, fmt.Errorf("argon2id: parameter %d must be %s<number>", i+1, name)
		}
		vals[i] = n
	}
	h := &secretHash{memory: uint32(vals[0]), time: uint32(vals[1]), threads: uint8(min(vals[2], 255))}
	switch {
	case vals[2] < 1 || vals[2] > argon2MaxP:
		return nil, fmt.Errorf("argon2id: p must be 1 to %d", argon2MaxP)
	case vals[1] < 1 || vals[1] > argon2MaxTime:
		return nil, fmt.Errorf("argon2id: t must be 1 to %d", argon2MaxTime)
	case vals[0] < 8*vals[2] || vals[0] > argon2MaxMem:
		return nil, fmt.Errorf("argon2id: m must be 8*p to %d KiB", argon2MaxMem)
	}
	var err error
	if h.salt, err = base64.RawStdEncoding.Strict().DecodeString(parts[2]); err != nil || len(h.salt) < 8 || len(h.salt) > 64 {
		return nil, errors.New("argon2id: salt must be 8 to 64 bytes in unpadded base64")
	}
	if h.key, err = base64.RawStdEncoding.Strict().DecodeString(parts[3]); err != nil || len(h.key) < 16 || len(h.key) > 64 {
		return nil, errors.New("argon2id: hash must be 16 to 64 bytes in unpadded base64")
	}
	return h, nil
}

// HashSecret encodes secret for secret_hash: algorithm "argon2id" (a fresh random
// salt, the parameters above) or "sha256".
func HashSecret(secret, algorithm string) (string, error) {
	switch algorithm {
	case "sha256":
		sum := sha256.Sum256([]byte(secret))
		return sha256Prefix + hex.EncodeToString(sum[:]), nil
	case "argon2id":
		salt := make([]byte, argon2SaltLen)
		if _, err := rand.Read(salt); err != nil {
			return "", fmt.Errorf("generating salt: %w", err)
		}
		key := argon2.IDKey([]byte(secret), salt, Argon2Time, Argon2Memory, Argon2Threads, argon2KeyLen)
		return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, Argon2Memory, Argon2Time, Argon2Threads,
			base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key)), nil
	default:
		return "", fmt.Errorf("unknown algorithm %q (argon2id or sha256)", algorithm)
	}
}

// maxVerified bounds the cache of argon2id verifications.
const maxVerified = 1024

// argon2Slots bounds concurrent argon2id verifications (each holds up to
// argon2MaxMem): a burst of token requests with wrong secrets queues here instead
// of exhausting memory; failures also count against the client's rate limit.
const argon2Slots = 2

// verifier checks presented secrets against secret hashes. A successful argon2id
// verification is remembered by an HMAC (under the per-process key) of client id
// and secret, so its cost is paid once per distinct secret, not per token request.
// Staleness across instances: none. It remembers that a secret matches a hash of
// this process's config (a new config generation builds a new verifier), which
// nothing in the store can change.
type verifier struct {
	macKey []byte
	slots  chan struct{}

	mu       sync.Mutex
	verified map[[sha256.Size]byte]struct{}
	computed atomic.Int64 // argon2id computations made, for tests
}

func newVerifier(macKey []byte) *verifier {
	return &verifier{macKey: macKey, slots: make(chan struct{}, argon2Slots), verified: map[[sha256.Size]byte]struct{}{}}
}

// check reports whether secret matches h, in constant time for a given hash.
func (v *verifier) check(clientID string, h *secretHash, secret string) bool {
	if h.sha256 != nil {
		sum := sha256.Sum256([]byte(secret))
		return subtle.ConstantTimeCompare(sum[:], h.sha256) == 1
	}
	m := hmac.New(sha256.New, v.macKey)
	m.Write([]byte(clientID))
	m.Write([]byte{0})
	m.Write([]byte(secret))
	var id [sha256.Size]byte
	m.Sum(id[:0])
	// The key is a keyed hash: looking it up reveals nothing about the secret.
	v.mu.Lock()
	_, ok := v.verified[id]
	v.mu.Unlock()
	if ok {
		return true
	}
	v.slots <- struct{}{}
	v.computed.Add(1)
	key := argon2.IDKey([]byte(secret), h.salt, h.time, h.memory, h.threads, uint32(len(h.key)))
	<-v.slots
	if subtle.ConstantTimeCompare(key, h.key) != 1 {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for k := range v.verified { // full: an arbitrary entry gives way
		if len(v.verified) < maxVerified {
			break
		}
		delete(v.verified, k)
	}
	v.verified[id] = struct{}{}
	return true
}

// cached is how many verifications are remembered (for tests).
func (v *verifier) cached() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.verified)
}
