package agent

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/storage"
)

// ErrAgentNotFound is the fault of a removal of an agent that is not registered
// (or, for an owner, not registered as theirs: a stranger learns nothing of
// another person's agents).
var ErrAgentNotFound = &fault.Error{Class: fault.NotFound, Message: "agent not found"}

// CodeAgentNotFound is the wire code of ErrAgentNotFound.
const CodeAgentNotFound = "agent_not_found"

func errAgentNotFound() error {
	return newError(ErrAgentNotFound, CodeAgentNotFound, "no agent with this deviceId is registered")
}

// OwnedAgent is one of a human's agents, as their agents page lists it.
type OwnedAgent struct {
	DeviceID       string `json:"deviceId"`
	KeyFingerprint string `json:"keyFingerprint"`
	RegisteredAt   Time   `json:"registeredAt"`
}

// Removed is what a removal took away.
type Removed struct {
	DeviceID       string
	HumanID        string
	KeyFingerprint string // of the agent's key ("" if its record held no valid key)
	RegisteredAt   Time
}

// Remove unregisters the agent deviceID (the operator's removal): its record, its
// key index entry and its entry among its human's agents go, and the human's
// leaderboard entry drops by one (the human leaves the leaderboard with their
// last agent), all in one transaction. An unknown deviceId is ErrAgentNotFound.
//
// Afterwards the deviceId and the key are free: either may be registered again,
// through a new init (a fresh signed message: the replay markers of used ones are
// kept) and a new palm verification. Every instance answers registered:false
// within RemovalMaxAge, this one at once.
//
// After the commit it calls the OnRemoved hook (the agent's grants end); when
// that fails, the removal stands and Remove returns it with an error wrapping
// ErrAfterRemoval (removed_hook.go).
func (s *Service) Remove(ctx context.Context, deviceID string) (*Removed, error) {
	return s.remove(ctx, deviceID, "")
}

// RemoveOwned is Remove on behalf of humanID, the agent's owner verified by palm:
// an agent that is not theirs is ErrAgentNotFound, as an unknown one is.
func (s *Service) RemoveOwned(ctx context.Context, humanID, deviceID string) (*Removed, error) {
	if humanID == "" {
		return nil, errAgentNotFound()
	}
	return s.remove(ctx, deviceID, humanID)
}

func (s *Service) remove(ctx context.Context, deviceID, owner string) (*Removed, error) {
	if err := ValidateDeviceID(deviceID); err != nil {
		return nil, err
	}
	var removed *Removed
	err := s.store.Update(ctx, func(txn storage.Txn) error {
		removed = nil // fn may run again
		r, err := unregister(txn, deviceID, owner)
		removed = r
		return err
	})
	if err != nil {
		return nil, err
	}
	// After the commit: this instance forgets the agent at once, and its
	// leaderboard cache with it.
	s.fresh.removedHere()
	s.board.gen.Add(1)
	s.events.Emit(ctx, event.Event{Kind: event.AgentRemoved, HumanID: removed.HumanID,
		DeviceID: removed.DeviceID, KeyFingerprint: removed.KeyFingerprint})
	return removed, s.afterRemoval(ctx, removed)
}

// unregister deletes the agent deviceID, owned by owner unless owner is "", and
// updates the indexes; it only reads and writes txn.
func unregister(txn storage.Txn, deviceID, owner string) (*Removed, error) {
	b, err := txn.Get(deviceKey(deviceID))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, errAgentNotFound()
	}
	if err != nil {
		return nil, err
	}
	r, err := decodeRegistered(deviceID, b)
	if err != nil {
		return nil, err
	}
	if owner != "" && r.HumanID != owner {
		return nil, errAgentNotFound()
	}
	if err := storage.Prefetch(txn, humanKey(r.HumanID), removalGenKey()); err != nil {
		return nil, err
	}
	if err := txn.Delete(deviceKey(deviceID)); err != nil {
		return nil, err
	}
	// The key index entry, unless it names another device (it cannot while the
	// record exists; a defence against an inconsistent store).
	fingerprint := ""
	if der, err := decodeBase64(r.PublicKey); err == nil {
		if key, err := parseSPKI(der); err == nil {
			fingerprint = Fingerprint(key)
			switch v, err := txn.Get(publicKeyKey(key)); {
			case err == nil:
				if id, _ := parseKeyIndex(v); id == deviceID {
					if err := txn.Delete(publicKeyKey(key)); err != nil {
						return nil, err
					}
				}
			case !errors.Is(err, storage.ErrNotFound):
				return nil, err
			}
		}
	}
	if err := dropFromHuman(txn, r.HumanID, deviceID); err != nil {
		return nil, err
	}
	if err := bumpRemovalGen(txn); err != nil {
		return nil, err
	}
	return &Removed{DeviceID: deviceID, HumanID: r.HumanID, KeyFingerprint: fingerprint, RegisteredAt: r.RegisteredAt}, nil
}

// dropFromHuman takes deviceID (whose record is already deleted) out of humanID's
// agents and rewrites the human's leaderboard entry: one agent fewer, the first
// registration recomputed from the agents left, or no entry with none left.
func dropFromHuman(txn storage.Txn, humanID, deviceID string) error {
	var stats humanStats
	switch b, err := txn.Get(humanKey(humanID)); {
	case err == nil:
		if err := json.Unmarshal(b, &stats); err != nil {
			return fmt.Errorf("decoding human %s: %w", humanID, err)
		}
		if err := txn.Delete(leaderboardKey(stats, humanID)); err != nil {
			return err
		}
	case errors.Is(err, storage.ErrNotFound):
	default:
		return err
	}
	if err := txn.Delete(humanAgentKey(humanID, deviceID)); err != nil {
		return err
	}
	// The agents left: the index, or, when it misses some (agents registered
	// before it existed), the records themselves, which are indexed now.
	left, err := humanAgents(txn, humanID, stats.AgentCount-1, deviceID)
	if err != nil {
		return err
	}
	if len(left) == 0 {
		return txn.Delete(humanKey(humanID))
	}
	stats.AgentCount = int64(len(left))
	stats.Earliest = time.Time(left[0].RegisteredAt)
	for _, a := range left[1:] {
		if t := time.Time(a.RegisteredAt); t.Before(stats.Earliest) {
			stats.Earliest = t
		}
	}
	b, err := json.Marshal(stats)
	if err != nil {
		return err
	}
	if err := txn.Set(humanKey(humanID), b, 0); err != nil {
		return err
	}
	return txn.Set(leaderboardKey(stats, humanID), nil, 0)
}

// humanAgents returns humanID's agents but removed (being removed in txn), whose
// count is expected to be want, by registration time. When the index holds fewer
// (agents registered before it existed), it scans the agent records, and writes
// the missing index entries when removed is not "" (txn then belongs to an
// Update).
func humanAgents(txn storage.Txn, humanID string, want int64, removed string) ([]OwnedAgent, error) {
	var agents []OwnedAgent
	prefix := humanAgentsPrefix(humanID)
	err := txn.Iterate(prefix, func(key, value []byte) (bool, error) {
		deviceID := string(key[len(prefix):])
		if deviceID == removed {
			return true, nil
		}
		a, err := ownedAgent(deviceID, value)
		if err != nil {
			return false, err
		}
		agents = append(agents, a)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	if int64(len(agents)) < want {
		if agents, err = scanHumanAgents(txn, humanID, removed); err != nil {
			return nil, err
		}
	}
	sort.Slice(agents, func(i, j int) bool {
		ti, tj := time.Time(agents[i].RegisteredAt), time.Time(agents[j].RegisteredAt)
		if !ti.Equal(tj) {
			return ti.Before(tj)
		}
		return agents[i].DeviceID < agents[j].DeviceID
	})
	return agents, nil
}

// scanHumanAgents finds humanID's agents among all agent records: the way to
// those registered before the human's index existed, once: a removal (removed is
// not "") indexes them.
func scanHumanAgents(txn storage.Txn, humanID string, removed string) ([]OwnedAgent, error) {
	var agents []OwnedAgent
	var records [][2][]byte
	prefix := devicePrefix()
	needle := []byte(`"humanId":"` + humanID + `"`)
	err := txn.Iterate(prefix, func(key, value []byte) (bool, error) {
		if !bytes.Contains(value, needle) {
			return true, nil
		}
		deviceID := string(key[len(prefix):])
		if deviceID == removed {
			return true, nil
		}
		a, err := ownedAgent(deviceID, value)
		if err != nil {
			return false, err
		}
		agents = append(agents, a)
		records = append(records, [2][]byte{[]byte(deviceID), bytes.Clone(value)})
		return true, nil
	})
	if err != nil || removed == "" {
		return agents, err
	}
	for _, rec := range records {
		if err := txn.Set(humanAgentKey(humanID, string(rec[0])), rec[1], 0); err != nil {
			return nil, err
		}
	}
	return agents, nil
}

func ownedAgent(deviceID string, record []byte) (OwnedAgent, error) {
	r, err := decodeRegistered(deviceID, record)
	if err != nil {
		return OwnedAgent{}, err
	}
	a := OwnedAgent{DeviceID: deviceID, RegisteredAt: r.RegisteredAt}
	if der, err := decodeBase64(r.PublicKey); err == nil {
		if key, err := parseSPKI(der); err == nil {
			a.KeyFingerprint = Fingerprint(key)
		}
	}
	return a, nil
}

// HumanAgents returns the agents registered to humanID, oldest first.
func (s *Service) HumanAgents(ctx context.Context, humanID string) ([]OwnedAgent, error) {
	var agents []OwnedAgent
	err := s.store.View(ctx, func(txn storage.Txn) error {
		var stats humanStats
		switch b, err := txn.Get(humanKey(humanID)); {
		case err == nil:
			if err := json.Unmarshal(b, &stats); err != nil {
				return fmt.Errorf("decoding human %s: %w", humanID, err)
			}
		case !errors.Is(err, storage.ErrNotFound):
			return err
		}
		var err error
		agents, err = humanAgents(txn, humanID, stats.AgentCount, "")
		return err
	})
	return agents, err
}

// bumpRemovalGen counts one more removal in the store.
func bumpRemovalGen(txn storage.Txn) error {
	var gen uint64
	switch b, err := txn.Get(removalGenKey()); {
	case err == nil && len(b) == 8:
		gen = binary.BigEndian.Uint64(b)
	case err == nil, errors.Is(err, storage.ErrNotFound):
	default:
		return err
	}
	return txn.Set(removalGenKey(), binary.BigEndian.AppendUint64(nil, gen+1), 0)
}
