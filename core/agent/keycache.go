package agent

import (
	"crypto/ed25519"
	"sync"
	"sync/atomic"

	"filippo.io/edwards25519"

	"github.com/palmgate/palmgate/core/cachestat"
)

// registeredKeysMax bounds the keys VerifySignature remembers: about 8 MiB.
const registeredKeysMax = 1 << 16

// registeredKeys remembers, for public keys VerifySignature found registered,
// the deviceId they are registered to, so that an agent that signs again costs
// no store read. An agent can be removed (by any instance): the cache is answered
// from only while freshness allows it, and is emptied when a removal is seen
// (freshness.go); an entry is kept only if no emptying happened since the epoch
// its store read began in (stamp). A key not found is not remembered, as it may
// be registered at any time. When full, an arbitrary entry makes room (Go's map
// iteration starts at random). Staleness across instances: at most RemovalMaxAge
// after another instance's removal; a key registered by another instance is read
// from the store on its first check here.
type registeredKeys struct {
	mu      sync.RWMutex
	devices map[[ed25519.PublicKeySize]byte]string
	stats   cachestat.Counter // of get
	epoch   *atomic.Uint64    // freshness.epoch; nil: never stale (tests)
}

// get returns the deviceId key is registered to, if remembered.
func (r *registeredKeys) get(key ed25519.PublicKey) (deviceID string, ok bool) {
	if len(key) != ed25519.PublicKeySize {
		return "", false
	}
	r.mu.RLock()
	deviceID, ok = r.devices[[ed25519.PublicKeySize]byte(key)]
	r.mu.RUnlock()
	r.stats.Record(ok)
	return deviceID, ok
}

// put remembers that key is registered to deviceID, as read by a lookup that
// began at epoch stamp.
func (r *registeredKeys) put(key ed25519.PublicKey, deviceID string, stamp uint64) {
	if len(key) != ed25519.PublicKeySize {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.epoch != nil && r.epoch.Load() != stamp {
		return // the caches were emptied since the read: it may be stale
	}
	if r.devices == nil {
		r.devices = make(map[[ed25519.PublicKeySize]byte]string)
	}
	if len(r.devices) >= registeredKeysMax {
		for k := range r.devices {
			delete(r.devices, k)
			break
		}
	}
	r.devices[[ed25519.PublicKeySize]byte(key)] = deviceID
}

// clear forgets every key.
func (r *registeredKeys) clear() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.devices)
}

// validKeysMax bounds the keys validKeys remembers: 32 bytes and a decoded point
// (160 bytes) each, about 16 MiB with the map's own overhead.
const validKeysMax = 1 << 16

// validKeys remembers public keys that passed CheckPublicKey, by their exact 32
// bytes, with their negated points, so that an agent that signs again is not made
// to pay the point decompression, re-encoding and small-order check of its key
// on every request (about a third of a signature verification, twice a request
// before: at parse time and in Verify), nor the decompression that
// crypto/ed25519.Verify would do again (verifyPoint takes the point).
// CheckPublicKey is a pure function of those bytes, so a remembered answer never
// goes stale; a key it refuses is never remembered and is checked, and refused,
// every time; an unknown key is always checked. When full, an arbitrary entry
// makes room (Go's map iteration starts at random). The points are never
// modified once remembered: verifyPoint only reads them.
type validKeys struct {
	mu   sync.RWMutex
	keys map[[ed25519.PublicKeySize]byte]*edwards25519.Point
	// full is the check itself; nil means checkedPoint (tests count calls).
	full  func(ed25519.PublicKey) (*edwards25519.Point, error)
	stats cachestat.Counter // of point (so of check), for keys of the right size
}

// check is CheckPublicKey, answered from memory for a key it accepted before.
func (v *validKeys) check(key ed25519.PublicKey) error {
	_, err := v.point(key)
	return err
}

// point is checkedPoint, answered from memory for a key it accepted before.
func (v *validKeys) point(key ed25519.PublicKey) (*edwards25519.Point, error) {
	if len(key) != ed25519.PublicKeySize {
		return checkedPoint(key)
	}
	k := [ed25519.PublicKeySize]byte(key)
	v.mu.RLock()
	p, ok := v.keys[k]
	v.mu.RUnlock()
	v.stats.Record(ok)
	if ok {
		return p, nil
	}
	full := v.full
	if full == nil {
		full = checkedPoint
	}
	p, err := full(key)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.keys == nil {
		v.keys = make(map[[ed25519.PublicKeySize]byte]*edwards25519.Point)
	}
	if len(v.keys) >= validKeysMax {
		for old := range v.keys {
			delete(v.keys, old)
			break
		}
	}
	v.keys[k] = p
	return p, nil
}

// size is the number of keys remembered.
func (v *validKeys) size() int {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return len(v.keys)
}
