package portal

import (
	"crypto/sha256"
	"encoding/hex"
)

// The storage layout of this package:
//
//	portal/session/{humanId}/{hex(sha256(sessionId))} -> live session (JSON), until it expires
//
// A session is stored by the hash of its id, so the store never holds what a
// cookie carries; its key starts with the developer's humanId, so an operator ends
// all of one developer's sessions with one prefix.

func sessionPrefix(humanID string) []byte { return []byte("portal/session/" + humanID + "/") }
func sessionKey(humanID, id string) []byte {
	sum := sha256.Sum256([]byte(id))
	return append(sessionPrefix(humanID), hex.EncodeToString(sum[:])...)
}
