package agent

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/palmgate/palmgate/storage"
)

// Leaderboard limits.
const (
	DefaultLeaderboardLimit = 100
	MaxLeaderboardLimit     = 1000
)

// Lookup is the public view of an agent. An unknown agent is not registered and has
// RegisteredAt "never".
type Lookup struct {
	Registered   bool   `json:"registered"`
	Verified     bool   `json:"verified"`
	HumanID      string `json:"humanId,omitempty"`
	RegisteredAt any    `json:"registeredAt"`
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
	r, err := s.registered(ctx, c.DeviceID)
	if err != nil {
		return nil, err
	}
	return &SignatureCheck{
		Verified:   c.Verify(),
		Registered: r != nil && r.PublicKey == EncodePublicKey(c.PublicKey),
	}, nil
}

// LookupDevice returns the agent registered under deviceID.
func (s *Service) LookupDevice(ctx context.Context, deviceID string) (*Lookup, error) {
	if err := ValidateDeviceID(deviceID); err != nil {
		return nil, err
	}
	r, err := s.registered(ctx, deviceID)
	if err != nil {
		return nil, err
	}
	return lookupOf(r), nil
}

// LookupPublicKey returns the agent registered with key.
func (s *Service) LookupPublicKey(ctx context.Context, key ed25519.PublicKey) (*Lookup, error) {
	var r *Registered
	err := s.store.View(ctx, func(txn storage.Txn) error {
		deviceID, err := txn.Get(publicKeyKey(key))
		if errors.Is(err, storage.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		r, err = getRegistered(txn, string(deviceID))
		return err
	})
	if err != nil {
		return nil, err
	}
	return lookupOf(r), nil
}

func lookupOf(r *Registered) *Lookup {
	if r == nil {
		return &Lookup{RegisteredAt: "never"}
	}
	return &Lookup{Registered: true, Verified: true, HumanID: r.HumanID, RegisteredAt: r.RegisteredAt}
}

func (s *Service) registered(ctx context.Context, deviceID string) (*Registered, error) {
	var r *Registered
	err := s.store.View(ctx, func(txn storage.Txn) error {
		var err error
		r, err = getRegistered(txn, deviceID)
		return err
	})
	return r, err
}

// getRegistered returns the agent under deviceID, or nil when there is none.
func getRegistered(txn storage.Txn, deviceID string) (*Registered, error) {
	b, err := txn.Get(deviceKey(deviceID))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r Registered
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decoding agent %q: %w", deviceID, err)
	}
	return &r, nil
}

// Leaderboard returns up to limit humans with at least one agent, by agent count
// descending, then first registration ascending, then humanId. It reads limit keys
// of an index kept at registration time.
func (s *Service) Leaderboard(ctx context.Context, limit int) ([]LeaderboardEntry, error) {
	if limit <= 0 {
		limit = DefaultLeaderboardLimit
	}
	limit = min(limit, MaxLeaderboardLimit)
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
