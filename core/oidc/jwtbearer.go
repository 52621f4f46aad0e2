package oidc

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/storage"
)

// GrantTypeJWTBearer is the grant of an agent's signed assertion (RFC 7523 2.1).
const GrantTypeJWTBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// Bounds of an agent's assertion.
const (
	// MaxAssertionAhead bounds how far ahead an assertion's exp may be: a stolen
	// assertion is worth little, and its replay marker is short-lived.
	MaxAssertionAhead = 5 * time.Minute
	maxAssertionLen   = 4096
	maxJTILen         = 256
	// actorLastUsedStep is how stale an agent grant's lastUsedAt may get: it is
	// rewritten by a token request at most this often (the request writes its
	// replay marker anyway; the grant only when the step has passed).
	actorLastUsedStep = time.Minute
)

// assertionClaims are the claims of an agent's assertion.
type assertionClaims struct {
	jwt.RegisteredClaims
}

// tokenEndpoint is the token endpoint's URL, the one `aud` an assertion may name.
func (s *Service) tokenEndpoint() string { return s.issuer + "/token" }

// jwtBearer is the token endpoint's jwt-bearer grant (RFC 7523): a registered
// agent presents an assertion signed by its key (iss = sub = its deviceId, aud the
// token endpoint, exp at most MaxAssertionAhead ahead, a jti used once) and gets
// an access token for its human, under a live grant of that human for the client
// of the request (actor.go). No refresh token, no ID token.
func (s *Service) jwtBearer(ctx context.Context, c *caller, p url.Values) (*TokenResponse, error) {
	assertion := p.Get("assertion")
	if assertion == "" {
		return nil, c.refuse(ctx, oauthError(ErrInvalidRequest, "assertion is required"))
	}
	if len(assertion) > maxAssertionLen {
		return nil, c.refuse(ctx, oauthError(ErrInvalidGrant, "the assertion is longer than %d bytes", maxAssertionLen))
	}
	var asked []string
	if scope := p.Get("scope"); scope != "" {
		var err error
		if asked, err = parseScopeList(scope); err != nil {
			return nil, c.refuse(ctx, err)
		}
		if len(asked) == 0 {
			return nil, c.refuse(ctx, oauthError(ErrInvalidScope, "scope is empty"))
		}
	}
	claims, humanID, err := s.verifyAssertion(ctx, assertion)
	if err != nil {
		return nil, c.refuse(ctx, err)
	}
	deviceID := claims.Subject
	now := s.now()
	var cl *client
	var g *ActorGrant
	var ahead *signing
	err = s.store.Update(ctx, func(txn storage.Txn) error {
		g, ahead = nil, nil // fn may run again: nothing of a run before
		jtiKey, grantKey := actorJTIKey(deviceID, claims.ID), actorGrantKey(deviceID, c.id)
		if err := c.prefetch(txn, jtiKey, grantKey); err != nil {
			return err
		}
		var err error
		if cl, err = c.in(txn); err != nil {
			return err
		}
		switch _, err := txn.Get(jtiKey); {
		case err == nil:
			return oauthError(ErrInvalidGrant, "the assertion was already used (its jti is accepted once)")
		case !errors.Is(err, storage.ErrNotFound):
			return err
		}
		if g, err = getActorGrant(txn, deviceID, c.id); err != nil {
			return err
		}
		if g.HumanID != humanID {
			return errNoActorGrant
		}
		if !now.Before(g.ExpiresAt) {
			return errActorGrantEnded
		}
		for _, sc := range asked {
			if !slices.Contains(g.Scopes, sc) {
				return oauthError(ErrInvalidScope, "scope %q was not granted to the agent", sc)
			}
		}
		if err := s.checkGranted(cl, &grant{Scopes: g.Scopes, Resource: g.Resource}, p["resource"]); err != nil {
			return err
		}
		// Kept while the parser would still accept the assertion (its exp, with leeway).
		if err := txn.Set(jtiKey, nil, max(claims.ExpiresAt.Sub(now)+bearer.Leeway, time.Second)); err != nil {
			return err
		}
		if now.Sub(g.LastUsedAt) >= actorLastUsedStep {
			g.LastUsedAt = now.UTC()
			if err := s.putActorGrant(txn, g); err != nil {
				return err
			}
		}
		// The token is signed while the commit is written; it is answered only
		// if this run of fn is the one committed (signahead.go).
		scopes := g.Scopes
		if asked != nil {
			scopes = asked
		}
		ahead = s.signActorAhead(cl, g, scopes)
		return nil
	})
	if err != nil {
		return nil, err
	}
	resp, err := ahead.answer()
	if err == nil {
		s.events.Emit(ctx, event.Event{Kind: event.TokenIssued, Outcome: event.JWTBearer, ClientID: c.id, HumanID: humanID, DeviceID: g.DeviceID})
	}
	return resp, err
}

// verifyAssertion checks an agent's assertion: EdDSA by the key registered under
// its iss (= sub), aud the token endpoint, exp present and at most
// MaxAssertionAhead ahead, iat, a jti. It returns the claims and the agent's human.
func (s *Service) verifyAssertion(ctx context.Context, assertion string) (*assertionClaims, string, error) {
	if s.agents == nil {
		return nil, "", oauthError(ErrUnsupportedGrantType, "agents cannot obtain tokens here")
	}
	var claims assertionClaims
	var humanID string
	var lookupErr error
	var keyProblem string // the key function's refusal, in words
	parser := jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}),
		jwt.WithStrictDecoding(),
		jwt.WithAudience(s.tokenEndpoint()),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(bearer.Leeway),
		jwt.WithTimeFunc(s.now),
	)
	_, err := parser.ParseWithClaims(assertion, &claims, func(t *jwt.Token) (any, error) {
		c := t.Claims.(*assertionClaims)
		if c.Issuer == "" || c.Subject != c.Issuer {
			keyProblem = "iss and sub must both be the agent's deviceId"
			return nil, errors.New(keyProblem)
		}
		key, human, err := s.agents.AgentKey(ctx, c.Issuer)
		if err != nil {
			lookupErr = err
			return nil, err
		}
		if key == nil {
			keyProblem = "its issuer is not a registered agent"
			return nil, errors.New(keyProblem)
		}
		humanID = human
		return key, nil
	})
	if lookupErr != nil {
		return nil, "", fmt.Errorf("looking the agent up: %w", lookupErr)
	}
	if err != nil {
		if keyProblem == "" {
			keyProblem = assertionProblem(err)
		}
		return nil, "", oauthError(ErrInvalidGrant, "invalid assertion: %s", keyProblem)
	}
	switch {
	case claims.ExpiresAt.Sub(s.now()) > MaxAssertionAhead:
		return nil, "", oauthError(ErrInvalidGrant, "the assertion's exp is more than %s ahead", MaxAssertionAhead)
	case claims.ID == "" || len(claims.ID) > maxJTILen:
		return nil, "", oauthError(ErrInvalidGrant, "the assertion needs a jti of at most %d characters", maxJTILen)
	case claims.IssuedAt == nil:
		return nil, "", oauthError(ErrInvalidGrant, "the assertion needs an iat")
	case humanID == "":
		return nil, "", oauthError(ErrInvalidGrant, "the agent is not registered under a verified person")
	}
	return &claims, humanID, nil
}

// assertionProblem says in a few words why the parser refused an assertion.
func assertionProblem(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "its aud must be the token endpoint URL"
	case errors.Is(err, jwt.ErrTokenExpired):
		return "it has expired"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "exp is required"
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued), errors.Is(err, jwt.ErrTokenNotValidYet):
		return "it is not valid yet"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return "the signature is not the registered key's"
	}
	return "malformed or not signed with EdDSA"
}

// signActor makes the access token of an agent acting for its human under grant
// g: the human's pairwise sub for the client, the grant's resource (or the
// client's audience), `act` naming the agent, and the grant's id as `sid`. It
// never outlives the grant: its exp is the grant's end when that comes first.
// It returns the claims for the bearer cache, which answer fills (signahead.go).
func (s *Service) signActor(cl *client, g *ActorGrant, scopes []string) (*TokenResponse, *AccessClaims, error) {
	now := s.now()
	exp := now.Add(s.accessTTL)
	if g.ExpiresAt.Before(exp) {
		exp = g.ExpiresAt
	}
	scope := joinScopes(scopes)
	claims := &AccessClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: s.issuer, Subject: PairwiseSubject(s.pairwiseSecret, cl.sector, g.HumanID),
			Audience: s.accessAudience(cl, g.Resource), IssuedAt: jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(exp), ID: uuid.NewString(),
		},
		ClientID: cl.id, Scope: scope, GrantID: g.ID,
		Act: &bearer.Actor{Subject: g.DeviceID, Profile: bearer.ActorProfileAgent},
	}
	token, err := s.keys.Sign(keys.ES256, TypeAccessToken, claims)
	if err != nil {
		return nil, nil, fmt.Errorf("signing access token: %w", err)
	}
	return &TokenResponse{AccessToken: token, TokenType: "Bearer", ExpiresIn: int64(exp.Sub(now) / time.Second), Scope: scope}, claims, nil
}
