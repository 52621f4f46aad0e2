package agent

import (
	"sync"

	"github.com/palmgate/palmgate/core/cachestat"
)

// registeredAgentsMax bounds the agents the lookups remember: with deviceIds of
// up to 256 bytes, at most about 24 MiB.
const registeredAgentsMax = 1 << 16

// registeredAgents remembers the records of agents a lookup found registered, by
// deviceId, so that looking a registered agent up again reads nothing from the
// store: with several instances on PostgreSQL, reads then cost what they cost on
// Badger. A registration is permanent and its record never changes (nothing
// deletes or rewrites agent/d/ or agent/k/), so an entry never goes stale,
// whichever instance registered it; an agent not found is not remembered, as it
// may be registered at any time (another instance's registration shows on the
// next lookup). When full, an arbitrary entry makes room.
type registeredAgents struct {
	mu      sync.RWMutex
	records map[string]*Registered
	stats   cachestat.Counter // of get
}

func (r *registeredAgents) get(deviceID string) (*Registered, bool) {
	r.mu.RLock()
	rec, ok := r.records[deviceID]
	r.mu.RUnlock()
	r.stats.Record(ok)
	return rec, ok
}

func (r *registeredAgents) put(deviceID string, rec *Registered) {
	if rec == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.records == nil {
		r.records = make(map[string]*Registered)
	}
	if len(r.records) >= registeredAgentsMax {
		for k := range r.records {
			delete(r.records, k)
			break
		}
	}
	r.records[deviceID] = rec
}
