package oidc

import (
	"context"
	"errors"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/storage"
)

// keyFunc finds the verification key of a palmgate token of type typ among the
// issuer's keys (bearer.KeyFunc: typ, kid, the key's algorithm that of the token,
// which the parser pins, low-s). An unknown key id reloads
// the keys from the store (another instance may have just rotated them); a failed
// reload is returned wrapped, so that unavailableKey tells it apart.
func (s *Service) keyFunc(ctx context.Context, typ string) jwt.Keyfunc {
	return bearer.KeyFunc(ctx, s.keys, typ, "", false, nil)
}

// unavailableKey reports a token refused because the keys could not be read from the
// store: the edge answers 503, not "invalid".
func unavailableKey(err error) bool { return errors.Is(err, storage.ErrUnavailable) }

// VerifyAccessToken checks an access token with the one verifier every endpoint and
// the local middleware use (AccessVerifier: typ, iss, exp, sub, sid and its
// revocation). It returns the claims, or a fault with code invalid_token.
func (s *Service) VerifyAccessToken(ctx context.Context, token string) (*AccessClaims, error) {
	claims, err := s.access.Verify(ctx, token)
	if errors.Is(err, bearer.ErrInvalidToken) {
		return nil, oauthError(ErrInvalidToken, "the access token is invalid, expired or revoked")
	}
	if err != nil {
		return nil, err
	}
	return claims, nil
}

// Revocations is the set of revoked grants, for verifiers of access tokens.
func (s *Service) Revocations() bearer.Revocations { return s.revocations }

// AccessVerifier is the verifier of this issuer's access tokens, with its cache and
// revocation set, for resource servers in the same process.
func (s *Service) AccessVerifier() *bearer.Verifier { return s.access }
