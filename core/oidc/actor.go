package oidc

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/records"
	"github.com/palmgate/palmgate/storage"
)

// Agents acting for their humans (issue 24). A human grants one of their
// registered agents the right to act for them towards one client, with a set of
// scopes: the client sends the human through the authorization endpoint with
// `requested_actor=<deviceId>`, and the palm scan that completes that login
// records the grant (consentActor), if the agent is registered to the person who
// scanned. The agent then obtains access tokens on its own, with an assertion
// signed by its registered key (the jwt-bearer grant, jwtbearer.go); they carry
// the human's pairwise sub and an `act` claim naming the agent.

// Agents is what the delegation needs of the agent registry (core/agent.Service).
type Agents interface {
	// AgentKey returns the Ed25519 key of the agent registered under deviceID and
	// the human it is registered to; a nil key when none is.
	AgentKey(ctx context.Context, deviceID string) (ed25519.PublicKey, string, error)
}

// RequestedActorParam is the authorization request parameter naming the agent
// the human is asked to let act for them (the IETF draft "OAuth 2.0 Extension:
// On-Behalf-Of User Authorization for AI Agents").
const RequestedActorParam = "requested_actor"

// maxActorIDLen bounds a requested_actor: core/agent's MaxDeviceIDLen, so that
// every registered agent can be named (TestActorLongDeviceID holds them equal).
const maxActorIDLen = 256

// ActorGrant is a human's consent that one of their agents acts for them towards
// one client. Its ID is the `sid` of the tokens issued under it: revoking it
// refuses them (the revocation set).
type ActorGrant struct {
	ID         string    `json:"id"`
	HumanID    string    `json:"humanId"`
	DeviceID   string    `json:"deviceId"`
	ClientID   string    `json:"clientId"`
	Scopes     []string  `json:"scopes"`
	Resource   string    `json:"resource,omitempty"`
	CreatedAt  time.Time `json:"createdAt"`
	ExpiresAt  time.Time `json:"expiresAt"`
	LastUsedAt time.Time `json:"lastUsedAt,omitzero"`
}

// actorGrantTTL is the longest a grant lives, and how long it lives without
// requested_actor_until (actor_until.go): as long as a refresh family (the
// human's consent to an application lasts as long there), unless revoked first.
func (s *Service) actorGrantTTL() time.Duration { return s.refreshTTL }

// checkRequestedActor reads requested_actor of an authorization request: "" when
// absent, else a deviceId (printable, at most maxActorIDLen bytes).
func checkRequestedActor(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	if len(raw) > maxActorIDLen || !printable(raw) {
		return "", oauthError(ErrInvalidRequest, "requested_actor must be an agent's deviceId")
	}
	return raw, nil
}

func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// errActorNotOwned is the answer to a client whose requested_actor is not an agent
// of the person who signed in.
const errActorNotOwned = "the agent is not registered to the person who signed in"

// consentActor records, in the transaction that answers a verified login, the
// grant the login asked for (requested_actor): owner is the human the agent was
// found registered to (requestedActorOwner, for actor). It returns the refusal to
// send back to the client when the agent is not the scanning human's, and the
// revocation of the grant the new one replaces, for committed.
func (s *Service) consentActor(txn storage.Txn, ar *AuthRequest, actor, owner string) (*Redirect, revocation, error) {
	if ar.RequestedActor == "" {
		return nil, revocation{}, nil
	}
	if actor != ar.RequestedActor || owner == "" || owner != ar.HumanID {
		return &Redirect{URI: ar.RedirectURI, Error: ErrInvalidRequest, Description: errActorNotOwned,
			State: ar.State, Issuer: s.issuer, Mode: ar.ResponseMode}, revocation{}, nil
	}
	now := s.now().UTC()
	if !ar.ActorUntil.IsZero() && !now.Before(ar.ActorUntil) {
		return &Redirect{URI: ar.RedirectURI, Error: ErrInvalidRequest, Description: errActorUntilPassed,
			State: ar.State, Issuer: s.issuer, Mode: ar.ResponseMode}, revocation{}, nil
	}
	g := &ActorGrant{
		ID: uuid.NewString(), HumanID: ar.HumanID, DeviceID: ar.RequestedActor, ClientID: ar.ClientID,
		Scopes: ar.Scopes, Resource: ar.Resource, CreatedAt: now, ExpiresAt: s.actorGrantEnd(ar, now),
	}
	// A new consent replaces the agent's grant for the client; the tokens of the
	// one it replaces stop working, here at once (committed).
	var replaced revocation
	if old, err := getActorGrant(txn, g.DeviceID, g.ClientID); err == nil {
		until := now.Add(s.accessTTL + bearer.Leeway)
		if err := putRevoked(txn, old.ID, until, now); err != nil {
			return nil, revocation{}, err
		}
		replaced = revocation{grantID: old.ID, until: until}
	} else if !errors.Is(err, errNoActorGrant) {
		return nil, revocation{}, err
	}
	return nil, replaced, s.putActorGrant(txn, g)
}

var errNoActorGrant = oauthError(ErrInvalidGrant, "the agent's human has not let it act for this client (or revoked it)")

func (s *Service) putActorGrant(txn storage.Txn, g *ActorGrant) error {
	b, err := json.Marshal(g)
	if err != nil {
		return fmt.Errorf("encoding agent grant: %w", err)
	}
	ttl := max(g.ExpiresAt.Sub(s.now()), time.Second)
	if err := txn.Set(actorGrantKey(g.DeviceID, g.ClientID), b, ttl); err != nil {
		return err
	}
	return txn.Set(humanActorGrantKey(g.HumanID, g.DeviceID, g.ClientID), nil, ttl)
}

func getActorGrant(txn storage.Txn, deviceID, clientID string) (*ActorGrant, error) {
	return records.Get[ActorGrant](txn, actorGrantKey(deviceID, clientID), errNoActorGrant, "agent grant")
}

// readActorGrant is getActorGrant on its own, outside a transaction.
func readActorGrant(ctx context.Context, store storage.Store, deviceID, clientID string) (*ActorGrant, error) {
	return records.Read[ActorGrant](ctx, store, actorGrantKey(deviceID, clientID), errNoActorGrant, "agent grant")
}
