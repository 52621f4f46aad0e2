package oidc

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/storage"
)

// The human's control over their agents' grants (issue 24, item 4): the agents
// page lists them and revokes any. A revoked grant gets no new token at once (its
// record is gone), and its live tokens are refused at once on this instance and
// within RevocationMaxAge on the others (the revocation set, by its id = sid).

// ErrActorGrantNotFound answers a revocation of a grant that is not the human's
// (or no longer exists): the same answer, so a person learns nothing of others'.
var ErrActorGrantNotFound = &fault.Error{Class: fault.NotFound, Code: "not_found", Message: "no such grant of your agents"}

// HumanActorGrants lists the live grants of humanID's agents, by agent then client.
func (s *Service) HumanActorGrants(ctx context.Context, humanID string) ([]ActorGrant, error) {
	var out []ActorGrant
	err := s.store.View(ctx, func(txn storage.Txn) error {
		out = out[:0]
		prefix := humanActorGrantPrefix(humanID)
		var keys []string
		if err := txn.Iterate(prefix, func(k, _ []byte) (bool, error) {
			keys = append(keys, string(k[len(prefix):]))
			return true, nil
		}); err != nil {
			return err
		}
		now := s.now()
		for _, k := range keys {
			deviceID, clientID, ok := strings.Cut(k, "\x00")
			if !ok {
				continue
			}
			g, err := getActorGrant(txn, deviceID, clientID)
			if err == errNoActorGrant {
				continue
			}
			if err != nil {
				return err
			}
			if g.HumanID == humanID && now.Before(g.ExpiresAt) {
				out = append(out, *g)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing agent grants: %w", err)
	}
	return out, nil
}

// RevokeActorGrant revokes humanID's grant to agent deviceID for client clientID:
// ErrActorGrantNotFound when there is none of theirs.
func (s *Service) RevokeActorGrant(ctx context.Context, humanID, deviceID, clientID string) error {
	return s.revokeActorGrants(ctx, humanID, func(g *ActorGrant) bool { return g.DeviceID == deviceID && g.ClientID == clientID }, true)
}

// RevokeAgentGrants revokes every grant humanID gave agent deviceID (its removal).
func (s *Service) RevokeAgentGrants(ctx context.Context, humanID, deviceID string) error {
	return s.revokeActorGrants(ctx, humanID, func(g *ActorGrant) bool { return g.DeviceID == deviceID }, false)
}

// endActorGrants ends, in txn, the grants of list that match and are still
// humanID's (one revoked meanwhile, or given anew by another person, is left),
// and returns their revocations for committed.
func (s *Service) endActorGrants(txn storage.Txn, humanID string, list []ActorGrant, match func(*ActorGrant) bool) ([]revocation, error) {
	var done []revocation
	now := s.now()
	for i := range list {
		if match != nil && !match(&list[i]) {
			continue
		}
		g, err := getActorGrant(txn, list[i].DeviceID, list[i].ClientID)
		if err == errNoActorGrant {
			continue
		}
		if err != nil {
			return nil, err
		}
		if g.HumanID != humanID {
			continue
		}
		r, err := s.endActorGrant(txn, g, now)
		if err != nil {
			return nil, err
		}
		done = append(done, r)
	}
	return done, nil
}

func (s *Service) revokeActorGrants(ctx context.Context, humanID string, match func(*ActorGrant) bool, mustExist bool) error {
	grants, err := s.HumanActorGrants(ctx, humanID)
	if err != nil {
		return err
	}
	var done []revocation
	err = s.store.Update(ctx, func(txn storage.Txn) error {
		var err error // fn may run again: done is each run's own
		if done, err = s.endActorGrants(txn, humanID, grants, match); err != nil {
			return err
		}
		if mustExist && len(done) == 0 {
			return ErrActorGrantNotFound
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.committed(done...)
	return nil
}

// endActorGrant deletes grant g and its entry among its human's, and records its
// revocation (its tokens' sid), which it returns for committed: it only writes
// txn.
func (s *Service) endActorGrant(txn storage.Txn, g *ActorGrant, now time.Time) (revocation, error) {
	if err := txn.Delete(actorGrantKey(g.DeviceID, g.ClientID)); err != nil {
		return revocation{}, err
	}
	if err := txn.Delete(humanActorGrantKey(g.HumanID, g.DeviceID, g.ClientID)); err != nil {
		return revocation{}, err
	}
	until := now.Add(s.accessTTL + bearer.Leeway)
	if err := putRevoked(txn, g.ID, until, now); err != nil {
		return revocation{}, err
	}
	return revocation{grantID: g.ID, until: until}, nil
}
