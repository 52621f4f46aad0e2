package agent

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Fingerprint is the short form of an agent's key that its owner compares before
// scanning: the first 8 bytes of SHA-256 over the raw 32-byte Ed25519 key, in hex,
// in groups of four (`3f9a-0c1e-77b2-d041`). The agent prints the same next to its
// registration URL, so an owner handed another agent's URL can tell.
func Fingerprint(key ed25519.PublicKey) string {
	sum := sha256.Sum256(key)
	h := hex.EncodeToString(sum[:8])
	return strings.Join([]string{h[0:4], h[4:8], h[8:12], h[12:16]}, "-")
}
