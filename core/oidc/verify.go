package oidc

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/storage"
)

// keyFunc finds the verification key of a token by its `kid`, and checks its `typ`
// header, so that one kind of token can never stand in for another. An ES256
// signature must be in its low-s form, the only one palmgate signs (keys.LowS):
// the high form of a token is another string with the same claims. An unknown key id
// reloads the keys from the store (another instance may have just rotated them); a
// failed reload is returned wrapped, so that unavailableKey tells it apart.
func (s *Service) keyFunc(ctx context.Context, typ string) jwt.Keyfunc {
	return func(t *jwt.Token) (any, error) {
		if got, _ := t.Header["typ"].(string); !strings.EqualFold(got, typ) && !strings.EqualFold(got, "application/"+typ) {
			return nil, fmt.Errorf("token type %q is not %q", got, typ)
		}
		kid, _ := t.Header["kid"].(string)
		k, err := s.keys.Lookup(ctx, kid)
		if err != nil {
			return nil, err
		}
		if k.Algorithm != t.Method.Alg() {
			return nil, errors.New("the signing key is for another algorithm")
		}
		if k.Algorithm == keys.ES256 && !keys.LowS(t.Signature) {
			return nil, errors.New("the ES256 signature is not in its low-s form")
		}
		return k.Public(), nil
	}
}

// unavailableKey reports a token refused because the keys could not be read from the
// store: the edge answers 503, not "invalid".
func unavailableKey(err error) bool { return errors.Is(err, storage.ErrUnavailable) }

// VerifyAccessToken checks an access token: ES256 by one of the issuer's keys, `typ`
// at+jwt, issuer, expiry, and that its grant was not revoked. It returns the claims,
// or an *Error with code invalid_token.
func (s *Service) VerifyAccessToken(ctx context.Context, token string) (*AccessClaims, error) {
	claims, err := s.access.Verify(ctx, token)
	if errors.Is(err, bearer.ErrInvalidToken) {
		return nil, oauthError(ErrInvalidToken, "the access token is invalid, expired or revoked")
	}
	if err != nil {
		return nil, err
	}
	if claims.GrantID == "" {
		return nil, oauthError(ErrInvalidToken, "the access token lacks sid")
	}
	return claims, nil
}

// Revocations is the set of revoked grants, for verifiers of access tokens.
func (s *Service) Revocations() bearer.Revocations { return s.revocations }

// AccessVerifier is the verifier of this issuer's access tokens, with its cache and
// revocation set, for resource servers in the same process.
func (s *Service) AccessVerifier() *bearer.Verifier { return s.access }
