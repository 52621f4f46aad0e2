package oidc

import (
	"bytes"
	"context"
	"encoding/binary"
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
// before the index existed are not in it: while any may still live (sso_session
// and an hour of rolling upgrade after the first start of an instance with the
// index, oidc/sso-index-since), the end also scans every SSO session for the
// person's, in a read-only transaction. Revoking the grants scans the
// refresh families (oidc/grant/, as a client's deletion does: an incident is rare)
// and reads the person's agent grants from their index.

func sessionHumanPrefix(humanID string) []byte { return []byte("oidc/sso-human/" + humanID + "/") }
func sessionHumanKey(humanID, hash string) []byte {
	return append(sessionHumanPrefix(humanID), hash...)
}
func sessionPrefix() []byte        { return []byte("oidc/sso/") }
func codePrefix() []byte           { return []byte("oidc/code/") }
func sessionIndexSinceKey() []byte { return []byte("oidc/sso-index-since") }

// ErrInvalidHumanID refuses an EndHuman whose humanId is no humanId.
var ErrInvalidHumanID = errors.New("oidc: invalid humanId")

// EndHumanOptions says what EndHuman ends besides the person's SSO sessions.
type EndHumanOptions struct {
	// Revoke revokes every grant the person holds: their refresh families (every
	// refresh and access token of every application), their authorization codes
	// not yet redeemed, their agents' grants, and their remembered consents (the
	// next login asks again).
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
	Codes       int `json:"codes"`
	// Logins are the person's palm scans verified before the end whose browser
	// had not fetched the answer: each would have started a session (fourth
	// review); they are answered access_denied.
	Logins int `json:"logins"`
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
	var codes [][]byte
	var actor []ActorGrant
	if opts.Revoke {
		var err error
		if grantIDs, codes, err = s.humanGrants(ctx, humanID); err != nil {
			return HumanEnded{}, err
		}
		if actor, err = s.HumanActorGrants(ctx, humanID); err != nil {
			return HumanEnded{}, err
		}
	}
	legacy, err := s.legacySessions(ctx, humanID)
	if err != nil {
		return HumanEnded{}, err
	}
	logins, err := s.verifiedLogins(ctx, humanID)
	if err != nil {
		return HumanEnded{}, err
	}
	var n HumanEnded
	var done []revocation
	err = s.store.Update(ctx, func(txn storage.Txn) error {
		n, done = HumanEnded{}, done[:0] // fn may run again: nothing of a run before
		var err error
		if n.SSOSessions, err = s.endHumanSessions(txn, humanID, legacy); err != nil {
			return err
		}
		if n.Logins, err = s.endVerifiedLogins(txn, humanID, logins); err != nil {
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
		if n.Codes, err = s.endHumanCodes(txn, humanID, codes); err != nil {
			return err
		}
		agents, err := s.endActorGrants(txn, humanID, actor, nil)
		if err != nil {
			return err
		}
		done = append(done, agents...)
		n.AgentGrants = len(agents)
		n.Consents, err = storage.DeletePrefix(txn, []byte(string(consentPrefix())+humanID+"/"))
		return err
	})
	if err != nil {
		return HumanEnded{}, fmt.Errorf("ending the sessions of a person: %w", err)
	}
	s.committed(done...)
	s.notifyEnded(ctx, done...)
	if opts.Revoke {
		// A code redeemed, or a login answered, between the listing and the commit
		// started a grant the listing did not see; once the sessions and codes are
		// gone, none can start without a new palm scan: one more pass ends those.
		g, c, err := s.endHumanLate(ctx, humanID)
		n.Grants, n.Codes = n.Grants+g, n.Codes+c
		if err != nil {
			return n, fmt.Errorf("ending the sessions of a person: %w", err)
		}
	}
	return n, nil
}

// endHumanLate revokes the grants and ends the codes of humanID that appeared
// while EndHuman's transaction ran, and counts them.
func (s *Service) endHumanLate(ctx context.Context, humanID string) (grants, codes int, err error) {
	ids, keys, err := s.humanGrants(ctx, humanID)
	if err != nil || len(ids)+len(keys) == 0 {
		return 0, 0, err
	}
	var done []revocation
	err = s.store.Update(ctx, func(txn storage.Txn) error {
		done, codes = done[:0], 0 // fn may run again: nothing of a run before
		for _, id := range ids {
			r, err := s.revokeGrant(txn, id)
			if err != nil {
				return err
			}
			done = append(done, r)
		}
		var err error
		codes, err = s.endHumanCodes(txn, humanID, keys)
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	s.committed(done...)
	s.notifyEnded(ctx, done...)
	return len(ids), codes, nil
}

// endHumanCodes deletes the codes under keys that are still humanID's and
// unused, and counts them: a code redeemed afterwards is invalid_grant.
func (s *Service) endHumanCodes(txn storage.Txn, humanID string, keys [][]byte) (int, error) {
	n := 0
	for _, k := range keys {
		v, err := txn.Get(k)
		if errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, err
		}
		var c codeRecord
		if json.Unmarshal(v, &c) != nil || c.HumanID != humanID || c.GrantID != "" {
			continue
		}
		if err := txn.Delete(k); err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}

// humanGrants lists the ids of humanID's refresh families not yet revoked, and
// the keys of their codes not yet redeemed (each a grant to be).
func (s *Service) humanGrants(ctx context.Context, humanID string) (ids []string, codes [][]byte, err error) {
	err = s.store.View(ctx, func(txn storage.Txn) error {
		ids, codes = ids[:0], codes[:0]
		prefix := grantPrefix()
		if err := txn.Iterate(prefix, func(k, v []byte) (bool, error) {
			var g grant
			if json.Unmarshal(v, &g) == nil && g.HumanID == humanID && !g.Revoked {
				ids = append(ids, string(k[len(prefix):]))
			}
			return true, nil
		}); err != nil {
			return err
		}
		return txn.Iterate(codePrefix(), func(k, v []byte) (bool, error) {
			var c codeRecord
			if json.Unmarshal(v, &c) == nil && c.HumanID == humanID && c.GrantID == "" {
				codes = append(codes, bytes.Clone(k))
			}
			return true, nil
		})
	})
	if err != nil {
		return nil, nil, fmt.Errorf("listing the grants of a person: %w", err)
	}
	return ids, codes, nil
}

// endHumanSessions deletes humanID's SSO sessions (those of their index, and
// legacy: the hashes of their unindexed sessions) and the index entries, and
// counts the live ones it ended.
func (s *Service) endHumanSessions(txn storage.Txn, humanID string, legacy []string) (int, error) {
	hashes := map[string]bool{}
	for _, h := range legacy {
		hashes[h] = true
	}
	prefix := sessionHumanPrefix(humanID)
	if err := txn.IterateKeys(prefix, func(k []byte) (bool, error) {
		hashes[string(k[len(prefix):])] = true
		return true, nil
	}); err != nil {
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

// legacySessions lists the hashes of humanID's SSO sessions that are in no index
// (started by a release before the index), while such may live: a scan of every
// session, in a read-only transaction (no conflict with the logins meanwhile).
func (s *Service) legacySessions(ctx context.Context, humanID string) ([]string, error) {
	if s.ssoTTL == 0 || !s.now().Before(s.indexSince.Add(s.ssoTTL+legacyRollout)) {
		return nil, nil
	}
	var out []string
	err := s.store.View(ctx, func(txn storage.Txn) error {
		out = out[:0]
		sp := sessionPrefix()
		return txn.Iterate(sp, func(k, v []byte) (bool, error) {
			var sess ssoSession
			if json.Unmarshal(v, &sess) == nil && sess.HumanID == humanID {
				out = append(out, string(k[len(sp):]))
			}
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing the sessions of a person: %w", err)
	}
	return out, nil
}

// verifiedLogins lists the ids of humanID's authorization requests whose palm
// scan is verified and whose answer (a code and a new SSO session) the browser
// has not fetched yet, in a read-only transaction: a scan of the requests (an
// incident is rare; they live the login's lifetime and a day).
func (s *Service) verifiedLogins(ctx context.Context, humanID string) ([]string, error) {
	var out []string
	err := s.store.View(ctx, func(txn storage.Txn) error {
		out = out[:0]
		prefix := authRequestKey("")
		return txn.Iterate(prefix, func(k, v []byte) (bool, error) {
			var ar AuthRequest
			if json.Unmarshal(v, &ar) == nil && ar.Status == RequestVerified && ar.HumanID == humanID {
				out = append(out, string(k[len(prefix):]))
			}
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing the logins of a person: %w", err)
	}
	return out, nil
}

// endVerifiedLogins marks the requests of ids still verified for humanID
// RequestEnded (finishWith answers them access_denied), and counts them.
func (s *Service) endVerifiedLogins(txn storage.Txn, humanID string, ids []string) (int, error) {
	n := 0
	for _, id := range ids {
		ar, err := getAuthRequest(txn, id)
		if errors.Is(err, ErrUnknownAuthRequest) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if ar.Status != RequestVerified || ar.HumanID != humanID {
			continue // answered meanwhile: its session or code is ended with the others
		}
		ar.Status = RequestEnded
		if err := s.putAuthRequest(txn, ar); err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}

// legacyRollout is how long after the first start of a release with the index
// an instance of an earlier one may still start sessions (a rolling upgrade).
const legacyRollout = time.Hour

// sessionIndexSince returns when the first instance that indexes SSO sessions
// started on the store, recording now if none did: sessions older than that may
// be in no index (legacySessions).
func sessionIndexSince(ctx context.Context, store storage.Store, now time.Time) (time.Time, error) {
	var since time.Time
	err := store.Update(ctx, func(txn storage.Txn) error {
		b, err := txn.Get(sessionIndexSinceKey())
		if err == nil && len(b) == 8 {
			since = time.UnixMilli(int64(binary.BigEndian.Uint64(b)))
			return nil
		}
		if err != nil && !errors.Is(err, storage.ErrNotFound) {
			return err
		}
		since = now
		return txn.Set(sessionIndexSinceKey(), binary.BigEndian.AppendUint64(nil, uint64(now.UnixMilli())), 0)
	})
	return since, err
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
