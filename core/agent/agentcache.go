package agent

import (
	"sync"
	"sync/atomic"

	"github.com/palmgate/palmgate/core/cachestat"
)

// registeredAgentsMax bounds the agents the lookups remember: with deviceIds of
// up to 256 bytes, at most about 24 MiB.
const registeredAgentsMax = 1 << 16

// registeredAgents remembers the records of agents a lookup found registered, by
// deviceId, so that looking a registered agent up again reads nothing from the
// store: with several instances on PostgreSQL, reads then cost what they cost on
// Badger. An agent can be removed (by any instance), so the cache is answered
// from only while freshness allows it and is emptied when a removal is seen
// (freshness.go), as registeredKeys is; an entry is kept only if no emptying
// happened since its read began (stamp). An agent not found is not remembered,
// as it may be registered at any time (another instance's registration shows on
// the next lookup). When full, an arbitrary entry makes room.
type registeredAgents struct {
	mu      sync.RWMutex
	records map[string]*Registered
	stats   cachestat.Counter // of get
	epoch   *atomic.Uint64    // freshness.epoch; nil: never stale (tests)
}

func (r *registeredAgents) get(deviceID string) (*Registered, bool) {
	r.mu.RLock()
	rec, ok := r.records[deviceID]
	r.mu.RUnlock()
	r.stats.Record(ok)
	return rec, ok
}

func (r *registeredAgents) put(deviceID string, rec *Registered, stamp uint64) {
	if rec == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.epoch != nil && r.epoch.Load() != stamp {
		return // the caches were emptied since the read: it may be stale
	}
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

// clear forgets every agent.
func (r *registeredAgents) clear() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.records)
}
