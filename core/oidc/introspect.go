package oidc

import (
	"context"
	"crypto/subtle"
	"errors"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/fault"
)

// Introspection is the answer of token introspection (RFC 7662). An inactive token
// has only Active false.
type Introspection struct {
	Active    bool     `json:"active"`
	Scope     string   `json:"scope,omitempty"`
	ClientID  string   `json:"client_id,omitempty"`
	Subject   string   `json:"sub,omitempty"`
	Issuer    string   `json:"iss,omitempty"`
	Audience  []string `json:"aud,omitempty"`
	ExpiresAt int64    `json:"exp,omitempty"`
	IssuedAt  int64    `json:"iat,omitempty"`
	ID        string   `json:"jti,omitempty"`
	TokenType string   `json:"token_type,omitempty"`
	// TokenUse says which of palmgate's tokens it is: access_token or refresh_token.
	TokenUse string `json:"token_use,omitempty"`
	// Act is the agent acting for the subject (RFC 8693 4.1), for an agent's token.
	Act *bearer.Actor `json:"act,omitempty"`
}

// Introspect tells an authenticated client whether token (an access or a refresh
// token of this issuer) is active, and what it grants. Any authenticated client may
// introspect access tokens (resource servers are clients too); refresh tokens only
// by the client they were issued to.
func (s *Service) Introspect(ctx context.Context, clientID, token string) (*Introspection, error) {
	if token == "" {
		return nil, oauthError(ErrInvalidRequest, "token is required")
	}
	claims, err := s.access.Verify(ctx, token)
	if err == nil {
		return &Introspection{
			Active: true, Scope: claims.Scope, ClientID: claims.ClientID, Subject: claims.Subject,
			Issuer: claims.Issuer, Audience: claims.Audience, ExpiresAt: claims.ExpiresAt.Unix(),
			IssuedAt: unixOrZero(claims.IssuedAt), ID: claims.ID, TokenType: "Bearer", TokenUse: "access_token",
			Act: claims.Act,
		}, nil
	}
	if !errors.Is(err, bearer.ErrInvalidToken) {
		return nil, err
	}
	rc, g, err := s.activeRefresh(ctx, token)
	if err != nil {
		return nil, err
	}
	if rc == nil || rc.ClientID != clientID {
		return &Introspection{Active: false}, nil
	}
	return &Introspection{
		Active: true, Scope: joinScopes(g.Scopes), ClientID: rc.ClientID, Subject: rc.Subject,
		Issuer: rc.Issuer, ExpiresAt: rc.ExpiresAt.Unix(), IssuedAt: unixOrZero(rc.IssuedAt),
		ID: rc.ID, TokenUse: "refresh_token",
	}, nil
}

// activeRefresh returns a refresh token's claims and grant when it is the current
// token of a live family, or nils.
func (s *Service) activeRefresh(ctx context.Context, token string) (*RefreshClaims, *grant, error) {
	var rc RefreshClaims
	if _, err := s.refreshParser.ParseWithClaims(token, &rc, s.keyFunc(ctx, TypeRefreshToken)); unavailableKey(err) {
		return nil, nil, err
	} else if err != nil || rc.GrantID == "" {
		return nil, nil, nil
	}
	g, err := readGrant(ctx, s.store, rc.GrantID)
	var oe *fault.Error
	if errors.As(err, &oe) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if g.Revoked || subtle.ConstantTimeCompare([]byte(g.RefreshJTI), []byte(rc.ID)) != 1 {
		return nil, nil, nil
	}
	return &rc, g, nil
}

// Revoke revokes the grant of an access or refresh token issued to clientID (RFC
// 7009): its refresh family and its access tokens stop working. An invalid or
// unknown token is not an error; a token of another client is.
func (s *Service) Revoke(ctx context.Context, clientID, token string) error {
	if token == "" {
		return oauthError(ErrInvalidRequest, "token is required")
	}
	var grantID, owner string
	if claims, err := s.access.Verify(ctx, token); err == nil {
		if claims.ClientID != clientID {
			return oauthError(ErrUnauthorizedClient, "the token was issued to another client")
		}
		if claims.Act != nil {
			return s.revokeAgentToken(ctx, claims)
		}
		grantID, owner = claims.GrantID, claims.ClientID
	} else if !errors.Is(err, bearer.ErrInvalidToken) {
		return err
	} else {
		var rc RefreshClaims
		if _, err := s.refreshParser.ParseWithClaims(token, &rc, s.keyFunc(ctx, TypeRefreshToken)); unavailableKey(err) {
			return err
		} else if err != nil || rc.GrantID == "" {
			return nil
		}
		grantID, owner = rc.GrantID, rc.ClientID
	}
	if owner != clientID {
		return oauthError(ErrUnauthorizedClient, "the token was issued to another client")
	}
	return s.revoke(ctx, grantID)
}
