package oidc

import (
	"context"
	"errors"

	"github.com/palmgate/palmgate/storage"
)

// RedeemFirstParty exchanges, in process, a code issued to one of palmgate's own
// clients (the developer portal), which authenticates itself by running in the
// service: it is ExchangeCode (redirect URI, PKCE, single use, the same checks as
// the token endpoint's) and returns the humanId of the person who logged in,
// which only a first party may know.
func (s *Service) RedeemFirstParty(ctx context.Context, clientID, code, redirectURI, verifier string) (string, error) {
	b, err := storage.ReadKey(ctx, s.store, codeKey(code))
	if errors.Is(err, storage.ErrNotFound) {
		return "", oauthError(ErrInvalidGrant, "unknown or expired code")
	}
	if err != nil {
		return "", err
	}
	rec, err := decodeCode(b)
	if err != nil {
		return "", err
	}
	humanID := rec.HumanID
	// A code's human never changes: the exchange below decides whether it is good.
	if _, err := s.ExchangeCode(ctx, clientID, code, redirectURI, verifier); err != nil {
		return "", err
	}
	return humanID, nil
}
