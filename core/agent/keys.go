package agent

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"math"
	"time"
)

// The storage layout of this package:
//
//	agent/s/{sessionId}        -> session (JSON), kept a day past its expiry
//	agent/m/{sha256(key, msg)} -> replay marker of an accepted registration message
//	agent/pg/{deviceId}0x00{public key (SPKI base64)} -> the pending sessions of the device
//	                              and key (JSON: id and expiry of each; see pending.go),
//	                              kept until the last one expires
//	agent/pag/{address}        -> the pending sessions opened from the client address, as
//	                              agent/pg/
//	(agent/p/ and agent/pa/, one key per pending session, are no longer written; those
//	of earlier releases expire unread.)
//	agent/d/{deviceId}         -> registered agent (JSON)
//	agent/k/{hex public key}   -> deviceId of the agent registered with that key, 0x00, and a
//	                              copy of its agent/d/ record (entries written before the
//	                              copy was kept hold the deviceId alone)
//	agent/h/{humanId}          -> the human's agent count and first registration (JSON)
//	agent/lb/{^count}{earliest ms}{humanId} -> empty: the leaderboard index, in order
//	agent/ha/{humanId}/{deviceId} -> a copy of the agent/d/ record: the human's agents
//	                              (written since agent removal exists; an older human's
//	                              agents are found by a scan of agent/d/ once, see
//	                              remove.go, and indexed then)
//	agent/gen                  -> removal generation (8 bytes, big endian): counts the
//	                              removals, so that every instance can tell that what it
//	                              caches may be stale (freshness.go)
//	agent/o/{hex sha256(secret)} -> an owner's session on the agents page (JSON; the
//	                              browser holds the secret in a cookie), until it expires
//	agent/oh/{humanId}/{hex sha256(secret)} -> "" (a human's verified owner sessions, for
//	                              an operator ending them), until the session expires
//
// The leaderboard index is rewritten for one human at each registration and each
// removal, so reading the top N is a prefix scan of N keys.

// publicKeyPrefix is the key index's prefix (absentKeys watches it).
const publicKeyPrefix = "agent/k/"

func sessionKey(id string) []byte { return []byte("agent/s/" + id) }
func replayKey(sum []byte) []byte { return append([]byte("agent/m/"), sum...) }
func pendingKey(deviceID, key string) []byte {
	return []byte("agent/pg/" + deviceID + "\x00" + key)
}
func addressPendingKey(address string) []byte { return []byte("agent/pag/" + address) }
func deviceKey(deviceID string) []byte        { return []byte("agent/d/" + deviceID) }
func publicKeyKey(key []byte) []byte          { return []byte(publicKeyPrefix + hex.EncodeToString(key)) }
func humanKey(humanID string) []byte          { return []byte("agent/h/" + humanID) }
func leaderboardPrefix() []byte               { return []byte("agent/lb/") }
func humanAgentsPrefix(humanID string) []byte { return []byte("agent/ha/" + humanID + "/") }
func humanAgentKey(humanID, deviceID string) []byte {
	return append(humanAgentsPrefix(humanID), deviceID...)
}
func devicePrefix() []byte              { return []byte("agent/d/") }
func removalGenKey() []byte             { return []byte("agent/gen") }
func ownerSessionKey(ref string) []byte { return []byte("agent/o/" + ref) }
func humanOwnerSessionPrefix(humanID string) []byte {
	return []byte("agent/oh/" + humanID + "/")
}
func humanOwnerSessionKey(humanID, ref string) []byte {
	return append(humanOwnerSessionPrefix(humanID), ref...)
}
func leaderboardKey(h humanStats, humanID string) []byte {
	k := leaderboardPrefix()
	k = binary.BigEndian.AppendUint64(k, math.MaxUint64-uint64(h.AgentCount))
	k = binary.BigEndian.AppendUint64(k, uint64(h.Earliest.UnixMilli()))
	return append(k, humanID...)
}

// parseLeaderboardKey is the inverse of leaderboardKey.
func parseLeaderboardKey(k []byte) (LeaderboardEntry, bool) {
	k = k[len(leaderboardPrefix()):]
	if len(k) < 16 {
		return LeaderboardEntry{}, false
	}
	return LeaderboardEntry{
		AgentCount:           int64(math.MaxUint64 - binary.BigEndian.Uint64(k)),
		EarliestRegisteredAt: Time(time.UnixMilli(int64(binary.BigEndian.Uint64(k[8:])))),
		HumanID:              string(k[16:]),
	}, true
}

// keyIndexValue is the value of the key index entry of the agent deviceID whose
// record (JSON) is record. A deviceId holds no control character, so 0x00 ends it.
func keyIndexValue(deviceID string, record []byte) []byte {
	v := make([]byte, 0, len(deviceID)+1+len(record))
	v = append(v, deviceID...)
	v = append(v, 0)
	return append(v, record...)
}

// parseKeyIndex splits a key index value into the deviceId and the record, which
// is nil for an entry written before the index kept a copy of it.
func parseKeyIndex(v []byte) (deviceID string, record []byte) {
	id, record, found := bytes.Cut(v, []byte{0})
	if !found {
		return string(v), nil
	}
	return string(id), record
}
