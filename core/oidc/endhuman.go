package oidc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/storage"
)

// Ending one person (fourth review): when a person reports a stolen phone or an
// incident, the operator ends their single sign-on sessions and, if asked, every
// grant they hold, as Ory Hydra's DELETE /admin/oauth2/auth/sessions/login?subject=
// and its consent revocation do, or Keycloak's "Sign out" of a user. The person is
// named by their humanId (a client's owner in the admin API, the audit log's
// humanId, the id /v1 and the leaderboard show).
//
// Finding a person's SSO sessions costs a prefix scan of their index
// (oidc/sso-human/{humanId}/{hash}), written with the session in the same
// transaction and with the same TTL, so the entry expires with its session; an
// index entry whose session ended before (a logout, a new scan) is deleted with
// it, and one left dangling names no session and is skipped. Sessions written
// before the index existed are not in it: while any may still live (for
// sso_session after the last start of an instance, oidc/sso-index-since), the end
// also scans every SSO session for the person's. Revoking the grants scans the
// refresh families (oidc/grant/, as a client's deletion does: an incident is rare)
// and reads the person's agent grants from their index.

func sessionHumanPrefix(humanID string) []byte { return []byte("oidc/sso-human/" + humanID + "/") }
func sessionHumanKey(humanID, hash string) []byte {
	return append(sessionHumanPrefix(humanID), hash...)
}
func sessionPrefix() []byte        { return []byte("oidc/sso/") }
func sessionIndexSinceKey() []byte { return []byte("oidc/sso-index-since") }

// ErrInvalidHumanID refuses an EndHuman whose humanId is no humanId.
var ErrInvalidHumanID = errors.New("oidc: invalid humanId")

// EndHumanOptions says what EndHuman ends besides the person's SSO sessions.
type EndHumanOptions struct {
	// Revoke revokes every grant the person holds: their refresh families (every
	// refresh and access token of every application), their agents' grants, and
	// their remembered consents (the next login asks again).
	Revoke bool
	// Also ends, in the same transaction, the person's sessions that other
	// packages keep (the agents page, the developer portal); it may run again.
	Also func(txn storage.Txn) error
}

// HumanEnded counts what EndHuman ended.
type HumanEnded struct {
	SSOSessions int `json:"ssoSessions"`
	Grants      int `json:"grants"`
	AgentGrants int `json:"agentGrants"`
	Consents    int `json:"consents"`
}

// EndHuman ends every SSO session of humanID on every instance on the store at once
// (each authorization request reads its session from the store) and, with
// opts.Revoke, revokes every grant they hold: their refresh tokens stop working at
// once everywhere, their access tokens at once on this instance and within
// RevocationMaxAge on the others (the revocation set, as a logout). Everything is
// one transaction: a store that fails ends nothing. The person can sign in again
// with a palm scan.
func (s *Service) EndHuman(ctx context.Context, humanID string, opts EndHumanOptions) (HumanEnded, error) {
	if u, err := uuid.Parse(humanID); err != nil || u.String() != humanID {
		return HumanEnded{}, &fault.Error{Class: fault.Invalid, Code: fault.CodeInvalidField, Kind: ErrInvalidHumanID,
			Message: "humanId must be a person's id (a lowercase uuid, as the admin API and the audit log show it)", Details: map[string]any{"field": "humanId"}}
	}
	var grantIDs []string
	var actor []ActorGrant
	if opts.Revoke {
		var err error
		if grantIDs, err = s.humanGrantIDs(ctx, humanID); err != nil {
			return HumanEnded{}, err
		}
		if actor, err = s.HumanActorGrants(ctx, humanID); err != nil {
			return HumanEnded{}, err
		}
	}
	var n HumanEnded
	var done []revocation
	err := s.store.Update(ctx, func(txn storage.Txn) error {
		n, done = HumanEnded{}, done[:0] // fn may run again: nothing of a run before
		var err error
		if n.SSOSessions, err = s.endHumanSessions(txn, humanID); err != nil {
			return err
		}
		if opts.Also != nil {
			if err := opts.Also(txn); err != nil {
				return err
			}
		}
		if !opts.Revoke {
			return nil
		}
		for _, id := range grantIDs {
			r, err := s.revokeGrant(txn, id)
			if err != nil {
				return err
			}
			done = append(done, r)
		}
		n.Grants = len(grantIDs)
		now := s.now()
		for i := range actor {
			g, err := getActorGrant(txn, actor[i].DeviceID, actor[i].ClientID)
			if err == errNoActorGrant {
				continue // revoked meanwhile
			}
			if err != nil {
				return err
			}
			if g.HumanID != humanID {
				continue
			}
			r, err := s.endActorGrant(txn, g, now)
			if err != nil {
				return err
			}
			done = append(done, r)
			n.AgentGrants++
		}
		n.Consents, err = deletePrefix(txn, []byte(string(consentPrefix())+humanID+"/"))
		return err
	})
	if err != nil {
		return HumanEnded{}, fmt.Errorf("ending the sessions of a person: %w", err)
	}
	s.committed(done...)
	return n, nil
}

// humanGrantIDs lists the ids of humanID's refresh families not yet revoked.
func (s *Service) humanGrantIDs(ctx context.Context, humanID string) ([]string, error) {
	var ids []string
	err := s.store.View(ctx, func(txn storage.Txn) error {
		ids = ids[:0]
		prefix := grantPrefix()
		return txn.Iterate(prefix, func(k, v []byte) (bool, error) {
			var g grant
			if json.Unmarshal(v, &g) == nil && g.HumanID == humanID && !g.Revoked {
				ids = append(ids, string(k[len(prefix):]))
			}
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing the grants of a person: %w", err)
	}
	return ids, nil
}

// endHumanSessions deletes humanID's SSO sessions and their index entries, and
// counts the live ones it ended.
func (s *Service) endHumanSessions(txn storage.Txn, humanID string) (int, error) {
	hashes := map[string]bool{}
	prefix := sessionHumanPrefix(humanID)
	if err := txn.IterateKeys(prefix, func(k []byte) (bool, error) {
		hashes[string(k[len(prefix):])] = true
		return true, nil
	}); err != nil {
		return 0, err
	}
	// Sessions written before the index existed, while any may live.
	if _, err := txn.Get(sessionIndexSinceKey()); err == nil {
		sp := sessionPrefix()
		if err := txn.Iterate(sp, func(k, v []byte) (bool, error) {
			var sess ssoSession
			if json.Unmarshal(v, &sess) == nil && sess.HumanID == humanID {
				hashes[string(k[len(sp):])] = true
			}
			return true, nil
		}); err != nil {
			return 0, err
		}
	} else if !errors.Is(err, storage.ErrNotFound) {
		return 0, err
	}
	n := 0
	for hash := range hashes {
		sess, err := s.getSession(txn, hash)
		if err != nil {
			return 0, err
		}
		if sess != nil && sess.HumanID == humanID {
			if err := txn.Delete(sessionKey(hash)); err != nil {
				return 0, err
			}
			n++
		}
		if err := txn.Delete(sessionHumanKey(humanID, hash)); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// deletePrefix deletes every record under prefix and counts them.
func deletePrefix(txn storage.Txn, prefix []byte) (int, error) {
	var keys [][]byte
	if err := txn.IterateKeys(prefix, func(k []byte) (bool, error) {
		keys = append(keys, append([]byte(nil), k...))
		return true, nil
	}); err != nil {
		return 0, err
	}
	for _, k := range keys {
		if err := txn.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}

// markSessionIndex records, at each start, that SSO sessions written before the
// index existed may live for one more sso_session (endHumanSessions scans for them
// while the mark lives).
func markSessionIndex(ctx context.Context, store storage.Store, ttl time.Duration) error {
	return store.Update(ctx, func(txn storage.Txn) error {
		return txn.Set(sessionIndexSinceKey(), []byte{1}, ttl)
	})
}

// indexSession writes the index entry of the session of hash, whose human is
// humanID, with the session's TTL.
func (s *Service) indexSession(txn storage.Txn, humanID, hash string) error {
	return txn.Set(sessionHumanKey(humanID, hash), nil, s.ssoTTL)
}

// dropSession deletes the session of hash and its index entry.
func (s *Service) dropSession(txn storage.Txn, hash string) error {
	sess, err := s.getSession(txn, hash)
	if err != nil {
		return err
	}
	if sess != nil {
		if err := txn.Delete(sessionHumanKey(sess.HumanID, hash)); err != nil {
			return err
		}
	}
	return txn.Delete(sessionKey(hash))
}
