package agent

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/palmgate/palmgate/core/cachestat"
	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/storage"
)

// Leaderboard limits.
const (
	DefaultLeaderboardLimit = 100
	MaxLeaderboardLimit     = 1000
)

// Lookup is the public view of an agent. An unknown agent is not registered, and
// its RegisteredAt is the zero Time (the API says "never").
type Lookup struct {
	Registered   bool
	Verified     bool
	HumanID      string
	RegisteredAt Time
}

// SignatureCheck is the answer to a signature verification.
type SignatureCheck struct {
	Verified   bool `json:"verified"`
	Registered bool `json:"registered"`
}

// LeaderboardEntry is one human on the leaderboard.
type LeaderboardEntry struct {
	HumanID              string `json:"humanId"`
	AgentCount           int64  `json:"agentCount"`
	EarliestRegisteredAt Time   `json:"earliestRegisteredAt"`
}

// VerifySignature checks the challenge's signature over its message as given (no
// form or age rule), and whether its deviceId is registered with that same key.
func (s *Service) VerifySignature(ctx context.Context, c *Challenge) (*SignatureCheck, error) {
	// The key index names the one device registered with the key: a point read, with
	// no record to decode and no key to re-encode, unless the key was seen before
	// (and no removal may have made that stale: freshness), or found registered to
	// no agent with no registration since (absentKeys).
	epoch := s.fresh.epoch.Load()
	deviceID, known := s.registeredKeys.get(c.PublicKey)
	if known {
		if err := s.fresh.usable(ctx); err != nil {
			return nil, err
		}
		// Unless the caches were emptied meanwhile (a removal was seen).
		known = s.fresh.epoch.Load() == epoch
	}
	if !known && !s.absent.has(c.PublicKey) {
		stamp, absentAt := s.fresh.stamp(ctx), s.absent.stamp()
		switch v, err := storage.ReadKey(ctx, s.store, publicKeyKey(c.PublicKey)); {
		case err == nil:
			deviceID, _ = parseKeyIndex(v)
			known = true
			s.registeredKeys.put(c.PublicKey, deviceID, stamp)
		case errors.Is(err, storage.ErrNotFound):
			s.absent.put(c.PublicKey, absentAt)
		default:
			return nil, err
		}
	}
	check := &SignatureCheck{Verified: c.verify(s.validKeys.point), Registered: known && deviceID == c.DeviceID}
	if s.events != nil {
		result := event.BadSignature
		switch {
		case check.Verified && check.Registered:
			result = event.Registered
		case check.Verified:
			result = event.Unregistered
		}
		s.events(ctx, event.Event{Kind: event.SignatureCheck, Outcome: result})
	}
	return check, nil
}

// LookupDevice returns the agent registered under deviceID. An agent found
// registered is remembered (registeredAgents) until a removal is seen.
func (s *Service) LookupDevice(ctx context.Context, deviceID string) (*Lookup, error) {
	if err := ValidateDeviceID(deviceID); err != nil {
		return nil, err
	}
	epoch := s.fresh.epoch.Load()
	if r, ok := s.registered.get(deviceID); ok {
		if err := s.fresh.usable(ctx); err != nil {
			return nil, err
		}
		if s.fresh.epoch.Load() == epoch { // not emptied meanwhile
			return lookupOf(r), nil
		}
	}
	stamp := s.fresh.stamp(ctx)
	r, err := s.readRegistered(ctx, deviceID)
	if err != nil {
		return nil, err
	}
	s.registered.put(deviceID, r, stamp)
	return lookupOf(r), nil
}

// ParsePublicKey is the package's ParsePublicKey with the registry's memory of
// the keys it accepted (validKeys): the key of a lookup by public key is checked
// in full the first time only, as verify/signature checks it. That check was
// five of the 35 µs of Caddy's CPU a lookup took (docs/PERFORMANCE.md).
func (s *Service) ParsePublicKey(str string) (ed25519.PublicKey, error) {
	return parsePublicKey(str, s.validKeys.check)
}

// LookupPublicKey returns the agent registered with key; a key found registered
// is remembered, as LookupDevice remembers the agent.
func (s *Service) LookupPublicKey(ctx context.Context, key ed25519.PublicKey) (*Lookup, error) {
	epoch := s.fresh.epoch.Load()
	if deviceID, ok := s.registeredKeys.get(key); ok {
		if r, ok := s.registered.get(deviceID); ok {
			if err := s.fresh.usable(ctx); err != nil {
				return nil, err
			}
			if s.fresh.epoch.Load() == epoch { // not emptied meanwhile
				return lookupOf(r), nil
			}
		}
	}
	if s.absent.has(key) {
		return lookupOf(nil), nil
	}
	stamp, absentAt := s.fresh.stamp(ctx), s.absent.stamp()
	v, err := storage.ReadKey(ctx, s.store, publicKeyKey(key))
	if errors.Is(err, storage.ErrNotFound) {
		s.absent.put(key, absentAt)
		return lookupOf(nil), nil
	}
	if err != nil {
		return nil, err
	}
	// A key index written without its copy of the record names the device, whose
	// record is read next. The two reads may straddle a removal (the record is then
	// gone: not registered) or a removal and a new registration of the deviceId
	// (the record then holds another key: not this key's agent).
	var r *Registered
	deviceID, record := parseKeyIndex(v)
	if record == nil {
		r, err = s.readRegistered(ctx, deviceID)
		if err == nil && r != nil && r.PublicKey != EncodePublicKey(key) {
			r = nil
		}
	} else {
		r, err = decodeRegistered(deviceID, record)
	}
	if err != nil {
		return nil, err
	}
	if r != nil {
		s.registeredKeys.put(key, deviceID, stamp)
		s.registered.put(deviceID, r, stamp)
	}
	return lookupOf(r), nil
}

func lookupOf(r *Registered) *Lookup {
	if r == nil {
		return &Lookup{}
	}
	return &Lookup{Registered: true, Verified: true, HumanID: r.HumanID, RegisteredAt: r.RegisteredAt}
}

// readRegistered returns the agent under deviceID, or nil when there is none.
func (s *Service) readRegistered(ctx context.Context, deviceID string) (*Registered, error) {
	b, err := storage.ReadKey(ctx, s.store, deviceKey(deviceID))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return decodeRegistered(deviceID, b)
}

// decodeRegistered decodes the record of the agent deviceID.
func decodeRegistered(deviceID string, b []byte) (*Registered, error) {
	var r Registered
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decoding agent %q: %w", deviceID, err)
	}
	return &r, nil
}

// leaderboardMaxAge bounds how long a cached leaderboard is answered without
// reading the store. This instance's registrations drop the cache as soon as
// they commit; the bound is for those of other instances sharing the store: their
// registrations show here within it. It is safe because the leaderboard decides
// nothing (no request is admitted or refused on it); it only ranks.
const leaderboardMaxAge = time.Second

// leaderboardCache holds the last leaderboard read. It is valid while no registration has committed
// since the read (gen) and for at most leaderboardMaxAge.
type leaderboardCache struct {
	gen   atomic.Uint64     // bumped after every committed registration
	stats cachestat.Counter // of reads (Leaderboard, LeaderboardFill)

	mu       sync.Mutex
	fill     uint64 // number of the current fill (LeaderboardFill)
	readGen  uint64
	readAt   time.Time
	entries  []LeaderboardEntry // read-only once cached; nil: nothing cached
	complete bool               // entries are the whole leaderboard
}

// lookup returns the first limit cached entries and the fill they belong to,
// when the cache is valid at generation g and time now and holds them. The
// caller holds mu.
func (c *leaderboardCache) lookup(g uint64, now time.Time, limit int) ([]LeaderboardEntry, uint64, bool) {
	if c.entries == nil || c.readGen != g || now.Sub(c.readAt) >= leaderboardMaxAge || now.Before(c.readAt) {
		return nil, 0, false
	}
	if len(c.entries) < limit && !c.complete {
		return nil, 0, false
	}
	return c.entries[:min(limit, len(c.entries))], c.fill, true
}

// leaderboard answers from the cache, or reads the store and caches the read
// unless a registration committed meanwhile (its read may predate the commit).
func (s *Service) leaderboard(ctx context.Context, limit int) ([]LeaderboardEntry, uint64, error) {
	c := &s.board
	g, now := c.gen.Load(), s.now()
	c.mu.Lock()
	entries, fill, ok := c.lookup(g, now, limit)
	c.mu.Unlock()
	c.stats.Record(ok)
	if ok {
		return entries, fill, nil
	}
	entries, err := s.readLeaderboard(ctx, limit)
	if err != nil {
		return nil, 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if g == c.gen.Load() {
		c.fill++
		c.entries, c.complete, c.readGen, c.readAt = entries, len(entries) < limit, g, now
		return entries, c.fill, nil
	}
	return entries, 0, nil
}

// Leaderboard returns up to limit humans with at least one agent, by agent count
// descending, then first registration ascending, then humanId. It reads limit keys
// of an index kept at registration time, or answers from a cache that a
// registration of this instance drops as soon as it commits. The entries may be
// shared with other callers: do not modify them.
func (s *Service) Leaderboard(ctx context.Context, limit int) ([]LeaderboardEntry, error) {
	entries, _, err := s.leaderboard(ctx, leaderboardLimit(limit))
	return entries, err
}

// LeaderboardFill is Leaderboard with the number of the cache fill the entries
// belong to, 0 when they were read but not cached. Two answers with the same
// non-zero fill and limit hold the same entries, so a caller may keep what it makes
// of them (the edge, their JSON) by fill and limit.
func (s *Service) LeaderboardFill(ctx context.Context, limit int) ([]LeaderboardEntry, uint64, error) {
	return s.leaderboard(ctx, leaderboardLimit(limit))
}

func leaderboardLimit(limit int) int {
	if limit <= 0 {
		limit = DefaultLeaderboardLimit
	}
	return min(limit, MaxLeaderboardLimit)
}

// readLeaderboard reads the first limit keys of the leaderboard index.
func (s *Service) readLeaderboard(ctx context.Context, limit int) ([]LeaderboardEntry, error) {
	entries := make([]LeaderboardEntry, 0, min(limit, 64))
	err := s.store.View(ctx, func(txn storage.Txn) error {
		entries = entries[:0]
		return txn.Iterate(leaderboardPrefix(), func(key, _ []byte) (bool, error) {
			e, ok := parseLeaderboardKey(key)
			if !ok {
				return false, fmt.Errorf("corrupt leaderboard key %x", key)
			}
			entries = append(entries, e)
			return len(entries) < limit, nil
		})
	})
	return entries, err
}
