package agent

import (
	"crypto/ed25519"
	"sync"

	"github.com/palmgate/palmgate/core/cachestat"
	"github.com/palmgate/palmgate/storage"
)

// absentKeysMax bounds the keys absentKeys remembers: about 4 MiB.
const absentKeysMax = 1 << 16

// absentKeys remembers public keys that VerifySignature and LookupPublicKey found
// registered to no agent, so that an unregistered agent that signs again costs no
// store read (on Badger, a key that is not there is looked for in every level:
// about a twentieth of a signature check's CPU). It is exact, with no staleness,
// so it is kept only on a store that every write passes through
// (storage.Watcher: Badger and memstore, not PostgreSQL, which other instances
// write): every commit that writes a key index (agent/k/: a registration, a
// removal) advances the store's count of them, and the keys remembered at an
// earlier count are forgotten. Registrations wait for a person's palm scan, so
// they are rare next to signature checks. When full, an arbitrary entry makes
// room (Go's map iteration starts at random).
type absentKeys struct {
	changes *storage.Changes // the key index's commits; nil: nothing is remembered
	mu      sync.RWMutex
	at      uint64 // the count at which every key in keys was found absent
	keys    map[[ed25519.PublicKeySize]byte]struct{}
	stats   cachestat.Counter // of has, when remembering
}

// watchKeyIndex turns a on when store is a storage.Watcher; NewService calls it
// before the Service can register anything.
func (a *absentKeys) watchKeyIndex(store storage.Store) {
	if w, ok := store.(storage.Watcher); ok {
		a.changes = w.Watch([]byte(publicKeyPrefix))
	}
}

// stamp is the count to pass to put for a read that begins now.
func (a *absentKeys) stamp() uint64 {
	if a.changes == nil {
		return 0
	}
	return a.changes.Count()
}

// has reports whether key was found absent with no key index written since.
func (a *absentKeys) has(key ed25519.PublicKey) bool {
	if a.changes == nil || len(key) != ed25519.PublicKeySize {
		return false
	}
	now := a.changes.Count()
	a.mu.RLock()
	_, ok := a.keys[[ed25519.PublicKeySize]byte(key)]
	ok = ok && a.at == now
	a.mu.RUnlock()
	a.stats.Record(ok)
	return ok
}

// put remembers that key is absent, as found by a read begun at count stamp;
// nothing, if a key index was written since (has would not answer from it, and
// the keys remembered at the current count are kept).
func (a *absentKeys) put(key ed25519.PublicKey, stamp uint64) {
	if a.changes == nil || len(key) != ed25519.PublicKeySize {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.changes.Count() != stamp {
		return
	}
	if a.keys == nil || a.at != stamp {
		a.keys, a.at = make(map[[ed25519.PublicKeySize]byte]struct{}), stamp
	}
	if len(a.keys) >= absentKeysMax {
		for k := range a.keys {
			delete(a.keys, k)
			break
		}
	}
	a.keys[[ed25519.PublicKeySize]byte(key)] = struct{}{}
}
