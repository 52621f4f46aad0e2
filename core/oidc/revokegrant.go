package oidc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/storage"
)

// Revoking grants: a logout, a reused code or refresh token, the end of a
// person, a client's deletion. Each writes the store in a transaction; once it
// has committed, committed adds the revocations to this instance's set
// (revocation.go) and notifyEnded tells the relying parties (backchannel.go).

// revocation is a grant revoked in a transaction, for this instance's set of
// revocations once that transaction has committed (Service.committed).
type revocation struct {
	grantID string
	until   time.Time
	// ended: the grant was live until this revocation (notifyEnded).
	ended *ended
}

// revokeGrant marks a grant revoked: its refresh tokens and access tokens stop
// working. The revocation is recorded even when the grant record has expired. It
// only writes the store: the caller hands the revocation it returns to committed
// after the commit, as fn may run again, or not commit at all.
func (s *Service) revokeGrant(txn storage.Txn, id string) (revocation, error) {
	g, err := getGrant(txn, id)
	var oe *fault.Error
	var live *ended
	switch {
	case errors.As(err, &oe): // expired from the store: only its access tokens may live
	case err != nil:
		return revocation{}, err
	default:
		if !g.Revoked {
			live = &ended{clientID: g.ClientID, humanID: g.HumanID}
		}
		g.Revoked, g.RefreshJTI = true, ""
		if err := s.putGrant(txn, id, g, 0); err != nil {
			return revocation{}, err
		}
	}
	// Access tokens issued from the grant until now live at most accessTTL more.
	until := s.now().Add(s.accessTTL + bearer.Leeway)
	if err := putRevoked(txn, id, until, s.now()); err != nil {
		return revocation{}, err
	}
	return revocation{grantID: id, until: until, ended: live}, nil
}

// revoke revokes grants ids in one transaction and, once it has committed, adds
// them to this instance's set.
func (s *Service) revoke(ctx context.Context, ids ...string) error {
	var done []revocation
	err := s.store.Update(ctx, func(txn storage.Txn) error {
		var err error
		done, err = s.revokeGrants(txn, ids, done[:0]) // fn may run again: nothing of a run before
		return err
	})
	if err != nil {
		return err
	}
	s.committed(done...)
	return nil
}

// revokeGrants revokes grants ids in txn (revokeGrant), appending each
// revocation to done.
func (s *Service) revokeGrants(txn storage.Txn, ids []string, done []revocation) ([]revocation, error) {
	for _, id := range ids {
		r, err := s.revokeGrant(txn, id)
		if err != nil {
			return done, err
		}
		done = append(done, r)
	}
	return done, nil
}

// revokeClientGrants revokes the live grants of a client. Grants have no index by
// client: deleting a client is rare, so a scan of the grants does.
func (s *Service) revokeClientGrants(ctx context.Context, clientID string) error {
	var ids []string
	err := s.store.View(ctx, func(txn storage.Txn) error {
		ids = ids[:0]
		prefix := grantPrefix()
		return txn.Iterate(prefix, func(k, v []byte) (bool, error) {
			var g grant
			if json.Unmarshal(v, &g) == nil && g.ClientID == clientID && !g.Revoked {
				ids = append(ids, string(k[len(prefix):]))
			}
			return true, nil
		})
	})
	if err != nil {
		return fmt.Errorf("listing grants of client %s: %w", clientID, err)
	}
	for batch := range slices.Chunk(ids, 100) {
		if err := s.revoke(ctx, batch...); err != nil {
			return fmt.Errorf("revoking grants of client %s: %w", clientID, err)
		}
	}
	return nil
}

// committed adds revocations whose transaction has committed to this instance's
// set, so that it refuses their access tokens at once.
func (s *Service) committed(rs ...revocation) {
	for _, r := range rs {
		if r.grantID != "" {
			s.revocations.add(r.grantID, r.until)
		}
	}
}
