// Package exchangesig signs what one code exchange of palmgate signs
// (core/oidc's sign): an ES256 access token, an ID token (ES256 or RS256) and
// an ES256 refresh token, with core/keys and core/oidc's own claims types, so
// their encoding too. It is the baseline of issue 19's goal 3: the load script times it
// alone (scenarios signs and signs-rs), and the bench's own Caddy answers a
// token request with it and nothing else of palmgate's (bench/minimalcaddy,
// scenarios token-caddy and token-caddy-rs).
package exchangesig

import (
	"context"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/storage"
)

// Tokens are the three tokens of one exchange.
type Tokens struct {
	Access, ID, Refresh string
}

// Signer holds the signing keys.
type Signer struct {
	set    *keys.Set
	issuer string
}

// New opens (creating them when store has none) the signing keys in store.
func New(ctx context.Context, store storage.Store, issuer string) (*Signer, error) {
	set, err := keys.Open(ctx, store, nil)
	if err != nil {
		return nil, err
	}
	return &Signer{set: set, issuer: issuer}, nil
}

// Sign3 makes the three tokens of one exchange of clientID, its ID token
// signed with idAlg.
func (s *Signer) Sign3(idAlg, clientID string) (Tokens, error) {
	now := time.Now()
	sub := strings.Repeat("S", 43) // a pairwise subject
	grantID := uuid.NewString()
	authTime := now.Add(-time.Second).Unix()
	var t Tokens
	var err error
	if t.Access, err = s.set.Sign(keys.ES256, oidc.TypeAccessToken, oidc.AccessClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: s.issuer, Subject: sub, Audience: jwt.ClaimStrings{strings.TrimSuffix(s.issuer, "/oauth2")},
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)), ID: uuid.NewString(),
		},
		ClientID: clientID, Scope: "offline_access openid", AuthTime: authTime, GrantID: grantID,
	}); err != nil {
		return Tokens{}, err
	}
	if t.ID, err = s.set.Sign(idAlg, oidc.TypeIDToken, oidc.IDClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: s.issuer, Subject: sub, Audience: jwt.ClaimStrings{clientID},
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)),
		},
		AuthTime: authTime, Nonce: "n-0123456789abcdef", AMR: []string{"palm"}, AZP: clientID, GrantID: grantID,
	}); err != nil {
		return Tokens{}, err
	}
	if t.Refresh, err = s.set.Sign(keys.ES256, oidc.TypeRefreshToken, oidc.RefreshClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: s.issuer, Subject: sub, Audience: jwt.ClaimStrings{s.issuer},
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(2160 * time.Hour)), ID: uuid.NewString(),
		},
		ClientID: clientID, GrantID: grantID,
	}); err != nil {
		return Tokens{}, err
	}
	return t, nil
}
