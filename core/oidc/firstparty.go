package oidc

import "context"

// RedeemFirstParty redeems, in process, a code issued to one of palmgate's own
// clients (the developer portal), which authenticates itself by running in the
// service: the token endpoint's checks (redirect URI, PKCE, single use) and its
// transaction, the grant included, but no tokens, which such a client never
// uses. It returns the humanId of the person who logged in, which only a first
// party may know.
func (s *Service) RedeemFirstParty(ctx context.Context, clientID, code, redirectURI, verifier string) (string, error) {
	c, err := s.clients.trustedCaller(clientID)
	if err != nil {
		return "", err
	}
	r, err := s.redeemCode(ctx, c, code, redirectURI, verifier, nil, false)
	if err != nil {
		return "", err
	}
	return r.humanID, nil
}
