package palm

import (
	"crypto/sha256"
	"crypto/subtle"
)

// The storage layout of this package:
//
//	palm/c/{challengeId}                    -> challenge record (JSON), kept a day past expiry
//	palm/h/{sha256(attestor 0x00 subject)}  -> humanId
//
// Palm subjects are stored only as hashes: nothing the palm engine says about a person
// can be read back from the store.

func challengeKey(id string) []byte { return []byte("palm/c/" + id) }

func humanKey(attestor, subject string) []byte {
	h := sha256.New()
	h.Write([]byte(attestor))
	h.Write([]byte{0})
	h.Write([]byte(subject))
	return h.Sum([]byte("palm/h/"))
}

// nonceEqual compares nonces in constant time.
func nonceEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
