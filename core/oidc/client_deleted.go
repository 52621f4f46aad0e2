package oidc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/palmgate/palmgate/storage"
)

// A deleted client takes with it everything people gave it (issue 24): its
// refresh families (revokeClientGrants), the grants that let agents act for
// people towards it, and the people's remembered consents to it (session.go),
// so that nothing carries over to a client that comes back under the same id
// (a restored backup, say) or lingers in the store until its TTL.

// clientDeleteBatch bounds the records one transaction of the clean-up writes.
const clientDeleteBatch = 100

// clientDeleted runs once the deletion of dynamic client id has committed (by
// the portal, the admin API or the CLI: Clients.Delete): it revokes every
// refresh family and agent grant of the client, whose live access tokens this
// instance refuses at once (the revocation set) and the others within
// RevocationMaxAge, and forgets the consents to it. It tries each step even
// when one fails, and reports every failure; the deletion stands either way (an
// unknown client gets no token, whatever grants are left).
func (s *Service) clientDeleted(ctx context.Context, id string) error {
	return errors.Join(
		s.revokeClientGrants(ctx, id),
		s.revokeClientActorGrants(ctx, id),
		s.forgetClientConsents(ctx, id),
	)
}

// revokeClientActorGrants revokes every agent grant for client clientID.
func (s *Service) revokeClientActorGrants(ctx context.Context, clientID string) error {
	var devices []string
	suffix := []byte("\x00" + clientID)
	err := s.store.View(ctx, func(txn storage.Txn) error {
		devices = devices[:0]
		prefix := actorGrantPrefix()
		return txn.Iterate(prefix, func(k, v []byte) (bool, error) {
			var g ActorGrant
			if bytes.HasSuffix(k, suffix) && json.Unmarshal(v, &g) == nil && g.ClientID == clientID {
				devices = append(devices, g.DeviceID)
			}
			return true, nil
		})
	})
	if err != nil {
		return fmt.Errorf("listing agent grants of client %s: %w", clientID, err)
	}
	for batch := range slices.Chunk(devices, clientDeleteBatch) {
		var done []revocation
		err := s.store.Update(ctx, func(txn storage.Txn) error {
			done = done[:0] // fn may run again: nothing of a run before
			now := s.now()
			for _, deviceID := range batch {
				g, err := getActorGrant(txn, deviceID, clientID)
				if err == errNoActorGrant {
					continue // revoked meanwhile
				}
				if err != nil {
					return err
				}
				rv, err := s.endActorGrant(txn, g, now)
				if err != nil {
					return err
				}
				done = append(done, rv)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("revoking agent grants of client %s: %w", clientID, err)
		}
		s.committed(done...)
	}
	return nil
}

// forgetClientConsents deletes every person's remembered consent to client
// clientID (oidc/consent/{humanId}/{clientId}; a client id holds no "/").
func (s *Service) forgetClientConsents(ctx context.Context, clientID string) error {
	var keys [][]byte
	suffix := []byte("/" + clientID)
	err := s.store.View(ctx, func(txn storage.Txn) error {
		keys = keys[:0]
		return txn.Iterate(consentPrefix(), func(k, _ []byte) (bool, error) {
			if bytes.HasSuffix(k, suffix) {
				keys = append(keys, bytes.Clone(k))
			}
			return true, nil
		})
	})
	if err != nil {
		return fmt.Errorf("listing consents to client %s: %w", clientID, err)
	}
	for batch := range slices.Chunk(keys, clientDeleteBatch) {
		err := s.store.Update(ctx, func(txn storage.Txn) error {
			for _, k := range batch {
				if err := txn.Delete(k); err != nil && !errors.Is(err, storage.ErrNotFound) {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("forgetting consents to client %s: %w", clientID, err)
		}
	}
	return nil
}
