package oidc

import (
	"context"
	"errors"

	"github.com/palmgate/palmgate/storage"
)

// revokeAgentToken is Revoke (RFC 7009) for an agent's access token (one with
// `act`): it ends the agent's grant for the client, as revoking a login's token
// revokes its grant. Only revoking the token's sid would leave the grant live, and
// the jwt-bearer grant would go on answering 200 with tokens the revocation set
// already refuses, until it lapses (access_token_ttl). A grant replaced since
// (another id) is left alone: the token's own sid is revoked.
func (s *Service) revokeAgentToken(ctx context.Context, claims *AccessClaims) error {
	var done revocation
	err := s.store.Update(ctx, func(txn storage.Txn) error {
		done = revocation{} // fn may run again: nothing of a run before
		g, err := getActorGrant(txn, claims.Act.Subject, claims.ClientID)
		switch {
		case err == nil && g.ID == claims.GrantID:
			done, err = s.endActorGrant(txn, g, s.now())
			return err
		case err != nil && !errors.Is(err, errNoActorGrant):
			return err
		}
		done, err = s.revokeGrant(txn, claims.GrantID)
		return err
	})
	if err != nil {
		return err
	}
	s.committed(done)
	return nil
}
