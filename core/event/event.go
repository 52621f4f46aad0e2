// Package event is how core tells the operator what happened: a login, a token
// grant, a refused assertion, an admin's change. A service emits an Event to the
// Sink its Config names (nil: nothing), after the transaction that made it true
// has committed; the Caddy module turns events into Prometheus counters and audit
// log lines. core knows neither Prometheus nor zap: it only fills Events.
//
// An Event holds no secret, token, code, palm subject or full public key, so that
// whatever a sink does with one is safe to log.
package event

import "context"

// Kind is what happened.
type Kind uint8

// The kinds of event, with the Outcomes each may carry.
const (
	_ Kind = iota
	// Login: an OpenID Connect login. Started (authorize), Completed (a code was
	// released to the browser), Denied or Expired (access_denied was).
	Login
	// PalmAssertion: a palm challenge's end as the mobile app asked for it, with
	// Purpose. Verified, Denied (the person declined), Refused (bad signature,
	// unknown attestor, wrong claims, malformed), Replayed (the challenge had
	// completed already), Expired.
	PalmAssertion
	// TokenIssued: tokens were issued; Outcome is the grant type
	// (AuthorizationCode, RefreshToken).
	TokenIssued
	// RefreshReused: a rotated refresh token came back; its family is revoked.
	RefreshReused
	// CodeReused: an authorization code came back; its grant is revoked.
	CodeReused
	// Registration: an agent registration. Started (init), Verified (registered),
	// Failed (deviceId or key registered meanwhile), Denied (the owner declined).
	Registration
	// SignatureCheck: an agent's signature was checked. Registered (good signature
	// of the registered key), Unregistered (good signature, key not registered
	// under that deviceId), BadSignature.
	SignatureCheck
	// Logout: an RP-initiated logout. Revoked (the hint named a grant, now
	// revoked) or NoSession (nothing to revoke).
	Logout
	// ClientCreated, ClientUpdated, ClientSecretRotated, ClientDeleted: a dynamic
	// client changed, by the operator (admin API; HumanID "") or its developer
	// (portal; HumanID the developer).
	ClientCreated
	ClientUpdated
	ClientSecretRotated
	ClientDeleted
	// AgentRemoved: an agent was removed, by the operator or its human, with
	// HumanID (the agent's human), DeviceID and KeyFingerprint: once the removal has
	// committed, `s.events.Emit(ctx, event.Event{Kind: event.AgentRemoved,
	// HumanID: by, DeviceID: id, KeyFingerprint: Fingerprint(key)})` in core/agent.
	AgentRemoved
	// KeysRotated: the signing keys were rotated, Outcome Scheduled or Manual:
	// `app.Events().Emit(ctx, event.Event{Kind: event.KeysRotated, Outcome:
	// event.Scheduled})` in caddymodule once the rotation has committed.
	KeysRotated
	// Bearer: a palmgate_bearer decision. Allowed, Missing, Invalid, Expired,
	// InsufficientScope, Revoked, Unavailable.
	Bearer
	// BackupTaken: a backup of the whole store (the signing keys, the pairwise
	// secret, the client secrets' hashes) was streamed whole to an admin API
	// caller, emitted by caddymodule once the last byte is written.
	BackupTaken
	// PortalSessionsEnded: the operator ended a developer's portal sessions
	// (HumanID: the developer), once the deletion has committed.
	PortalSessionsEnded
	// HumanSessionsEnded: the operator ended every session of a person (HumanID),
	// Outcome Revoked when every grant they held was revoked too, once the
	// transaction has committed.
	HumanSessionsEnded

	// NumKinds bounds the kinds, for tables indexed by Kind.
	NumKinds
)

// Outcome says how it went. Its values are a fixed set, never a client's string,
// so that a metric may use them as label values.
type Outcome uint8

// Outcomes.
const (
	None Outcome = iota
	Started
	Completed
	Verified
	Denied
	Expired
	Refused
	Replayed
	Failed
	Registered
	Unregistered
	BadSignature
	Revoked
	NoSession
	AuthorizationCode
	RefreshToken
	Allowed
	Missing
	Invalid
	InsufficientScope
	Unavailable
	Scheduled
	Manual
	// JWTBearer: an agent's token (the jwt-bearer grant, issue 24).
	JWTBearer

	// NumOutcomes bounds the outcomes, for tables indexed by Outcome.
	NumOutcomes
)

var outcomeNames = [NumOutcomes]string{
	None: "", Started: "started", Completed: "completed", Verified: "verified", Denied: "denied",
	Expired: "expired", Refused: "refused", Replayed: "replayed", Failed: "failed",
	Registered: "registered", Unregistered: "unregistered", BadSignature: "bad_signature",
	Revoked: "revoked", NoSession: "no_session", AuthorizationCode: "authorization_code",
	RefreshToken: "refresh_token", Allowed: "allowed",
	Missing: "missing", Invalid: "invalid", InsufficientScope: "insufficient_scope",
	Unavailable: "unavailable", Scheduled: "scheduled", Manual: "manual",
	JWTBearer: "jwt_bearer",
}

// String is the outcome's name, a Prometheus label value ("" for None).
func (o Outcome) String() string {
	if o < NumOutcomes {
		return outcomeNames[o]
	}
	return "unknown"
}

// Event is one thing that happened. Only Kind is required.
type Event struct {
	Kind    Kind
	Outcome Outcome
	// Purpose is a palm challenge's purpose ("login", "agent_registration").
	Purpose string
	// ClientID is the OAuth client concerned, if any.
	ClientID string
	// HumanID is the human concerned, if known (never a palm subject).
	HumanID string
	// DeviceID is the agent concerned, if any.
	DeviceID string
	// KeyFingerprint is the short fingerprint of the agent's key (never the key).
	KeyFingerprint string
}

// Sink receives events. It is called after the commit, outside any transaction,
// on the request's goroutine: it must be quick and must not block. ctx is the
// request's (a sink may read the client address from it).
type Sink func(ctx context.Context, e Event)

// Emit hands e to the sink; a nil sink drops it.
func (s Sink) Emit(ctx context.Context, e Event) {
	if s != nil {
		s(ctx, e)
	}
}

type remoteKey struct{}

// WithRemote returns ctx carrying the client address remote, for a caller (the
// admin API) whose context holds no address the sink knows how to find.
func WithRemote(ctx context.Context, remote string) context.Context {
	return context.WithValue(ctx, remoteKey{}, remote)
}

// Remote is the client address WithRemote put in ctx, or "".
func Remote(ctx context.Context) string {
	r, _ := ctx.Value(remoteKey{}).(string)
	return r
}
