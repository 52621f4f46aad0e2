package agent

import (
	"crypto/ed25519"
	"sync"
)

// registeredKeysMax bounds the keys VerifySignature remembers: about 8 MiB.
const registeredKeysMax = 1 << 16

// registeredKeys remembers, for public keys VerifySignature found registered,
// the deviceId they are registered to, so that an agent that signs again costs
// no store read. A registration is permanent (nothing deletes or rewrites the
// key index), so an entry never goes stale, whichever instance registered it; a
// key not found is not remembered, as it may be registered at any time. When
// full, an arbitrary entry makes room (Go's map iteration starts at random).
// Staleness across instances: none that can admit anything wrong, since what it
// remembers cannot change; a key registered by another instance is read from the
// store on its first check here.
type registeredKeys struct {
	mu      sync.RWMutex
	devices map[[ed25519.PublicKeySize]byte]string
}

// get returns the deviceId key is registered to, if remembered.
func (r *registeredKeys) get(key ed25519.PublicKey) (deviceID string, ok bool) {
	if len(key) != ed25519.PublicKeySize {
		return "", false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	deviceID, ok = r.devices[[ed25519.PublicKeySize]byte(key)]
	return deviceID, ok
}

// put remembers that key is registered to deviceID.
func (r *registeredKeys) put(key ed25519.PublicKey, deviceID string) {
	if len(key) != ed25519.PublicKeySize {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
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
