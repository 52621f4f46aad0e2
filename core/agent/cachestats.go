package agent

import "github.com/palmgate/palmgate/core/cachestat"

// The names of the registry's caches in CacheStats.
const (
	// CacheRegisteredKeys: the deviceIds of public keys found registered
	// (signature checks, lookups by key).
	CacheRegisteredKeys = "agent_registered_keys"
	// CacheRegisteredAgents: the records of agents found registered (lookups).
	CacheRegisteredAgents = "agent_records"
	// CacheValidKeys: the public keys that passed CheckPublicKey (parsing and
	// verifying agent signatures).
	CacheValidKeys = "agent_valid_keys"
	// CacheAbsentKeys: the public keys found registered to no agent (signature
	// checks, lookups by key); kept only on a store every write passes through
	// (Badger): on PostgreSQL it counts nothing.
	CacheAbsentKeys = "agent_absent_keys"
	// CacheLeaderboard: the last leaderboard read.
	CacheLeaderboard = "leaderboard"
)

// CacheStats returns the hits and misses of the registry's in-memory caches
// since the Service was built.
func (s *Service) CacheStats() []cachestat.Stats {
	return []cachestat.Stats{
		s.registeredKeys.stats.Stats(CacheRegisteredKeys),
		s.registered.stats.Stats(CacheRegisteredAgents),
		s.validKeys.stats.Stats(CacheValidKeys),
		s.absent.stats.Stats(CacheAbsentKeys),
		s.board.stats.Stats(CacheLeaderboard),
	}
}
