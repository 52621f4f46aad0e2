// Package palm runs palm challenges: a person is asked to verify with a palm scan on a
// mobile app, and the palm-matching engine behind the app (a trusted "attestor")
// vouches for the result with a signed assertion. Verified assertions map to humans,
// which the login and the agent registry share. No biometric material ever enters
// this package: an attestor names a person by an opaque palm subject.
package palm

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/jsontime"
	"github.com/palmgate/palmgate/core/records"
	"github.com/palmgate/palmgate/storage"
)

// Purpose says what a challenge is for.
type Purpose string

// The purposes a challenge can have.
const (
	PurposeLogin             Purpose = "login"
	PurposeAgentRegistration Purpose = "agent_registration"
	// PurposeAgentManagement opens a person's agents page, where they can see and
	// remove the agents registered to them.
	PurposeAgentManagement Purpose = "agent_management"
)

// Status is the state of a challenge.
type Status string

// The states of a challenge. Only pending challenges can change.
const (
	StatusPending  Status = "pending"
	StatusVerified Status = "verified"
	StatusDenied   Status = "denied"
	StatusExpired  Status = "expired"
)

// Errors of challenge completion, faults of core's error model with their wire
// codes; returned as they are or wrapped with details (fmt.Errorf("%w: ...")).
var (
	ErrNotFound      = &fault.Error{Class: fault.NotFound, Code: "challenge_not_found", Message: "palm challenge not found"}
	ErrNotPending    = &fault.Error{Class: fault.Conflict, Code: "challenge_not_pending", Message: "palm challenge is no longer pending"}
	ErrExpired       = &fault.Error{Class: fault.Gone, Code: "challenge_expired", Message: "palm challenge has expired"}
	ErrScanLapsed    = &fault.Error{Class: fault.Gone, Code: "scan_url_expired", Message: "this scan URL was replaced or has lapsed: scan the code on the page again"}
	ErrMalformed     = &fault.Error{Class: fault.Invalid, Code: "invalid_assertion", Message: "malformed palm assertion"}
	ErrBadAssertion  = &fault.Error{Class: fault.Unauthorized, Code: "assertion_refused", Message: "palm assertion refused"}
	ErrNoDevAttestor = &fault.Error{Class: fault.NotFound, Code: "not_found", Message: "simulated palm scans are off (dev mode only)"}
)

// How long challenge records are kept. An unfinished challenge (pending, denied or
// expired) is kept only while it can still complete and for Grace after, so that
// pollers see "expired" rather than "not found"; a flood of unfinished requests
// therefore costs a bounded amount of disk. A verified one, which took a person's
// palm, is kept a day.
const (
	Grace             = 10 * time.Minute
	VerifiedRetention = 24 * time.Hour
)

// KeepFor is how long, from now, to keep a record of a request that expires at
// expiresAt: Grace after it, or VerifiedRetention once a palm verified it.
func KeepFor(now, expiresAt time.Time, verified bool) time.Duration {
	keep := Grace
	if verified {
		keep = VerifiedRetention
	}
	if d := expiresAt.Sub(now) + keep; d > time.Second {
		return d
	}
	return time.Second
}

// Request says what the person is asked to approve; the app shows it before they
// consent, so that they can tell a request they started from one relayed to them.
type Request struct {
	// ClientName is the application a login is for.
	ClientName string `json:"clientName,omitempty"`
	// SelfRegistered says that a developer registered the application (in the
	// developer portal), not the operator; ClientNotice says the same in words
	// (SelfRegisteredNotice) for the app to show beside the name.
	SelfRegistered bool   `json:"selfRegistered,omitempty"`
	ClientNotice   string `json:"clientNotice,omitempty"`
	// Scopes are the login's scopes, and ScopeDescriptions the same in words.
	Scopes            []string `json:"scopes,omitempty"`
	ScopeDescriptions []string `json:"scopeDescriptions,omitempty"`
	// RequestedAt is when the login was requested.
	RequestedAt jsontime.Time `json:"requestedAt,omitzero"`
	// BrowserIP and BrowserSummary ("Chrome on Windows") describe the browser that
	// requested the login.
	BrowserIP      string `json:"browserIp,omitempty"`
	BrowserSummary string `json:"browserSummary,omitempty"`
	// DeviceID and KeyFingerprint name the agent a registration is for; the agent
	// prints the same fingerprint.
	DeviceID       string `json:"deviceId,omitempty"`
	KeyFingerprint string `json:"keyFingerprint,omitempty"`
	// ActorDeviceID, on a login, names the registered agent the person is asked to
	// let act for them towards the application, with the scopes (requested_actor).
	ActorDeviceID string `json:"actorDeviceId,omitempty"`
	// ActorUntil is when that grant would end if the person consented now: the
	// client's requested_actor_until, or the longest a grant lives.
	ActorUntil jsontime.Time `json:"actorUntil,omitzero"`
	// Address is the requesting client's address as the edge counts it (its
	// address key), which the per-network cap counts the challenge under; "" when
	// the edge counts no address (rate_limit off). Never stored or shown.
	Address string `json:"-"`
}

// SelfRegisteredNotice is the words beside a self-registered application's name.
const SelfRegisteredNotice = "registered by a developer, not by the operator"

// Challenge is one palm verification request.
type Challenge struct {
	ID        string        `json:"challengeId"`
	Nonce     string        `json:"nonce"`
	Purpose   Purpose       `json:"purpose"`
	Status    Status        `json:"status"`
	ExpiresAt jsontime.Time `json:"expiresAt"`
	// ScanExpiresAt is when the current scan URL (the nonce) lapses unless renewed.
	ScanExpiresAt jsontime.Time `json:"scanExpiresAt"`
	Request       Request       `json:"request"`
	// Ref names the record the challenge belongs to (an authorization request or a
	// registration session); it is not shown to the app.
	Ref string `json:"-"`
	// HumanID is set once the challenge is verified.
	HumanID string `json:"-"`
	// Outcome is what the purpose's Outcome made of the challenge's end, set in
	// its transaction for its Committer's event (not stored).
	Outcome event.Outcome `json:"-"`
	// Reads are storage keys the purpose's Outcome will read when the challenge
	// ends, named by the purpose when it creates the challenge, so that the Outcome
	// can read them in one go with its own record (storage.Prefetch) rather than
	// after it. A hint only: it changes no answer. Not shown to the app.
	Reads [][]byte `json:"-"`

	scanIssuedAt time.Time
	// counted is the place New took under the pending caps (nil: none), which
	// Release gives back when the challenge is never stored.
	counted  *lapse
	replaced []replacedNonce
}

// record is the stored form of a Challenge (with the fields hidden from JSON output).
type record struct {
	Challenge
	Ref          string          `json:"ref"`
	HumanID      string          `json:"humanId,omitempty"`
	ScanIssuedAt time.Time       `json:"scanIssuedAt"`
	Replaced     []replacedNonce `json:"replaced,omitempty"`
	Reads        [][]byte        `json:"reads,omitempty"`
}

// StatusAt is the challenge's status at time now: a pending challenge past its
// expiry is expired.
func (c *Challenge) StatusAt(now time.Time) Status {
	if c.Status == StatusPending && !now.Before(time.Time(c.ExpiresAt)) {
		return StatusExpired
	}
	return c.Status
}

// Outcome receives the end of a challenge, inside the transaction that records it, so
// that the purpose's own records change in the same atomic write.
type Outcome interface {
	// Verified is called when the challenge has been verified by humanID.
	Verified(txn storage.Txn, c *Challenge, humanID string) error
	// Denied is called when the person declined the challenge.
	Denied(txn storage.Txn, c *Challenge) error
}

// Committer may be implemented by an Outcome that must learn when the
// transaction that ended a challenge has committed, for example to drop what it
// caches of the records that transaction changed. Committed runs after the
// commit, outside any transaction; ctx is the request's.
type Committer interface {
	Committed(ctx context.Context, c *Challenge)
}

// Service creates and completes palm challenges.
type Service struct {
	store    storage.Store
	now      func() time.Time
	issuer   string
	verifier *Verifier
	dev      *DevAttestor
	outcomes map[Purpose]Outcome
	pending  *pendingCaps
	events   event.Sink
}

// Config builds a Service.
type Config struct {
	Store storage.Store
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Issuer is the service's public base URL, the audience of assertions.
	Issuer string
	// AttestorKeys are the trusted palm engines as configured (CheckAttestors);
	// their keys are parsed here.
	AttestorKeys []AttestorConfig
	// Attestors are trusted palm engines with their keys already parsed, in
	// addition to AttestorKeys.
	Attestors []Attestor
	// Dev adds a built-in attestor for simulated scans.
	Dev bool
	// MaxPending caps, per purpose, the unfinished challenges this instance keeps
	// (see pendingCaps); zero or absent means no cap.
	MaxPending map[Purpose]int
	// MaxPendingPerNetwork caps, per purpose, those of them one client network
	// (Network of Request.Address) created; zero or absent means no such cap. It
	// applies only beneath a MaxPending cap.
	MaxPendingPerNetwork map[Purpose]int
	// Events receives the ends of challenges (event.PalmAssertion); nil: none.
	Events event.Sink
}

// NewService builds a Service from its configuration.
func NewService(cfg Config) (*Service, error) {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	var attestors []Attestor
	if len(cfg.AttestorKeys) > 0 || len(cfg.Attestors) == 0 {
		var err error
		if attestors, err = parseAttestors(cfg.AttestorKeys, cfg.Dev); err != nil {
			return nil, err
		}
	}
	attestors = append(attestors, cfg.Attestors...)
	var dev *DevAttestor
	if cfg.Dev {
		var err error
		if dev, err = NewDevAttestor(cfg.Issuer, now); err != nil {
			return nil, err
		}
		attestors = append(append([]Attestor(nil), attestors...), dev.Attestor())
	}
	verifier, err := NewVerifier(cfg.Issuer, attestors, now)
	if err != nil {
		return nil, err
	}
	return &Service{
		store:    cfg.Store,
		now:      now,
		issuer:   cfg.Issuer,
		verifier: verifier,
		dev:      dev,
		outcomes: map[Purpose]Outcome{},
		pending:  newPendingCaps(cfg.MaxPending, cfg.MaxPendingPerNetwork),
		events:   cfg.Events,
	}, nil
}

// Handle registers what happens when a challenge of purpose p ends. Call it before
// serving requests.
func (s *Service) Handle(p Purpose, o Outcome) { s.outcomes[p] = o }

// Dev reports whether simulated palm scans are available.
func (s *Service) Dev() bool { return s.dev != nil }

// New returns a fresh pending challenge that expires after ttl; PutChallenge
// stores it, usually in the same transaction as the record named by ref. Past the
// purpose's cap of unfinished challenges, or its cap for the network of
// req.Address, it returns a busy *fault.Error (Unavailable, or TooMany for the
// network's cap) with its RetryAfter.
func (s *Service) New(purpose Purpose, ref string, req Request, ttl time.Duration) (*Challenge, error) {
	now := s.now()
	counted, err := s.pending.take(purpose, req.Address, now, ttl+Grace)
	if err != nil {
		return nil, err
	}
	nonce, err := newNonce()
	if err != nil {
		s.pending.give(purpose, counted)
		return nil, err
	}
	expires := jsontime.Time(now.Add(ttl).UTC())
	return &Challenge{
		ID:            uuid.NewString(),
		Nonce:         nonce,
		Purpose:       purpose,
		Status:        StatusPending,
		ExpiresAt:     expires,
		ScanExpiresAt: scanExpiry(now, expires),
		Request:       req,
		Ref:           ref,
		scanIssuedAt:  now,
		counted:       counted,
	}, nil
}

// Release gives back the place under the pending caps that New took for c, when
// c is never stored: the request that made it was refused (a replayed message,
// an agent already registered), so nothing of it is on disk, and a refusal must
// not shut new requests out for c's lifetime. Call it only once the transaction
// that would have stored c has failed without committing; a second call does
// nothing.
func (s *Service) Release(c *Challenge) {
	if c == nil || c.counted == nil {
		return
	}
	s.pending.give(c.Purpose, c.counted)
	c.counted = nil
}

func newNonce() (string, error) {
	nonce := make([]byte, 18)
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("generating challenge nonce: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(nonce), nil
}

// ScanURL is the URL the QR code encodes: the mobile app opens it to learn what is
// asked, and completes the challenge at its assertion endpoint.
func (s *Service) ScanURL(c *Challenge) string {
	return s.issuer + "/v1/palm/challenges/" + c.ID + "?nonce=" + c.Nonce
}

// PutChallenge stores c in txn, kept as KeepFor says.
func (s *Service) PutChallenge(txn storage.Txn, c *Challenge) error {
	b, err := json.Marshal(record{Challenge: *c, Ref: c.Ref, HumanID: c.HumanID, ScanIssuedAt: c.scanIssuedAt, Replaced: c.replaced, Reads: c.Reads})
	if err != nil {
		return fmt.Errorf("encoding palm challenge: %w", err)
	}
	return txn.Set(challengeKey(c.ID), b, KeepFor(s.now(), time.Time(c.ExpiresAt), c.Status == StatusVerified))
}

// GetChallenge reads a challenge in txn, or returns ErrNotFound.
func GetChallenge(txn storage.Txn, id string) (*Challenge, error) {
	if !validChallengeID(id) {
		return nil, ErrNotFound
	}
	r, err := records.Get[record](txn, challengeKey(id), ErrNotFound, "palm challenge "+id)
	if err != nil {
		return nil, err
	}
	return r.challenge(), nil
}

// ReadChallenge is GetChallenge on its own, outside a transaction.
func ReadChallenge(ctx context.Context, store storage.Store, id string) (*Challenge, error) {
	if !validChallengeID(id) {
		return nil, ErrNotFound
	}
	r, err := records.Read[record](ctx, store, challengeKey(id), ErrNotFound, "palm challenge "+id)
	if err != nil {
		return nil, err
	}
	return r.challenge(), nil
}

// validChallengeID reports whether id has the form of a challenge id, a UUID:
// any other is not found without reading the store.
func validChallengeID(id string) bool {
	_, err := uuid.Parse(id)
	return err == nil
}

// challenge returns the challenge r stores.
func (r *record) challenge() *Challenge {
	c := r.Challenge
	c.Ref, c.HumanID, c.scanIssuedAt, c.replaced, c.Reads = r.Ref, r.HumanID, r.ScanIssuedAt, r.Replaced, r.Reads
	if c.scanIssuedAt.IsZero() { // written before scan URLs were renewed
		c.scanIssuedAt = time.Time(c.ExpiresAt)
		c.ScanExpiresAt = c.ExpiresAt
	}
	return &c
}

// read reads challenge id on its own.
func (s *Service) read(ctx context.Context, id string) (*Challenge, error) {
	return ReadChallenge(ctx, s.store, id)
}

// Lookup returns challenge id for the mobile app that opened its scan URL: the
// nonce must be the current one, within its lifetime, while the challenge is
// pending (ErrScanLapsed for a replaced or lapsed one, ErrNotFound for any other).
func (s *Service) Lookup(ctx context.Context, id, nonce string) (*Challenge, error) {
	c, err := s.read(ctx, id)
	if err != nil {
		return nil, err
	}
	now := s.now()
	c.Status = c.StatusAt(now)
	switch st := c.nonceState(nonce, now); {
	case st == nonceUnknown:
		return nil, ErrNotFound
	case st != nonceOpen && c.Status == StatusPending:
		return nil, ErrScanLapsed
	}
	return c, nil
}

// Complete verifies an assertion (a compact JWS from a trusted attestor) for
// challenge id, and on success records the verified challenge, the human and the
// purpose's outcome in one transaction. Each challenge completes at most once.
func (s *Service) Complete(ctx context.Context, id, assertion string) (*Challenge, error) {
	c, err := s.complete(ctx, id, assertion)
	s.emitEnd(ctx, c, err, event.Verified)
	return c, err
}

func (s *Service) complete(ctx context.Context, id, assertion string) (*Challenge, error) {
	claims, err := s.verifier.Verify(assertion)
	if err != nil {
		return nil, err
	}
	if claims.Challenge != id {
		return nil, fmt.Errorf("%w: assertion is for another challenge", ErrBadAssertion)
	}
	human := humanKey(claims.Issuer, claims.Subject)
	return s.finish(ctx, id, &claims.Nonce, ErrBadAssertion, [][]byte{human}, func(txn storage.Txn, c *Challenge) error {
		humanID, err := s.humanFor(txn, claims.Issuer, claims.Subject)
		if err != nil {
			return err
		}
		c.Status, c.HumanID = StatusVerified, humanID
		if o := s.outcomes[c.Purpose]; o != nil {
			return o.Verified(txn, c, humanID)
		}
		return nil
	})
}

// Deny records that the person declined challenge id in the palm app, which
// names the challenge by a nonce of its scan URL.
func (s *Service) Deny(ctx context.Context, id, nonce string) (*Challenge, error) {
	c, err := s.finish(ctx, id, &nonce, ErrNotFound, nil, s.deny)
	s.emitEnd(ctx, c, err, event.Denied)
	return c, err
}

// Withdraw records that the person declined challenge id on the page that asked
// for it (the login page's Cancel, the registration page's "This is not my
// agent"), whose caller has checked that page's own binding: no scan nonce is
// needed, so a page left open past its scan URL's lifetime (a background tab, no
// script) still declines while the challenge is pending. It is no palm app's
// answer and emits no PalmAssertion event; the purpose's own event says it.
func (s *Service) Withdraw(ctx context.Context, id string) (*Challenge, error) {
	return s.finish(ctx, id, nil, ErrNotFound, nil, s.deny)
}

func (s *Service) deny(txn storage.Txn, c *Challenge) error {
	c.Status = StatusDenied
	if o := s.outcomes[c.Purpose]; o != nil {
		return o.Denied(txn, c)
	}
	return nil
}

// DevScan completes challenge id as if the palm engine had recognised palmSubject.
// It exists only in dev mode.
func (s *Service) DevScan(ctx context.Context, id, nonce, palmSubject string) (*Challenge, error) {
	if s.dev == nil {
		return nil, ErrNoDevAttestor
	}
	if _, err := s.Lookup(ctx, id, nonce); err != nil {
		return nil, err
	}
	assertion, err := s.dev.Sign(id, nonce, palmSubject)
	if err != nil {
		return nil, err
	}
	return s.Complete(ctx, id, assertion)
}

// finish moves a pending challenge to its end state in one transaction. The
// nonce must be one a scan URL of the challenge carried recently (see nonceState);
// an unknown one gives wrongNonce; nil (Withdraw) checks none. The keys of
// prefetch, which end reads, are read with the challenge.
func (s *Service) finish(ctx context.Context, id string, nonce *string, wrongNonce error, prefetch [][]byte, end func(storage.Txn, *Challenge) error) (*Challenge, error) {
	if !validChallengeID(id) {
		return nil, ErrNotFound
	}
	var done *Challenge
	err := s.store.Update(ctx, func(txn storage.Txn) error {
		if err := storage.Prefetch(txn, append([][]byte{challengeKey(id)}, prefetch...)...); err != nil {
			return err
		}
		c, err := GetChallenge(txn, id)
		if err != nil {
			return err
		}
		now := s.now()
		nonceSt := nonceOpen
		if nonce != nil {
			if nonceSt = c.nonceState(*nonce, now); nonceSt == nonceUnknown {
				return wrongNonce
			}
		}
		switch c.StatusAt(now) {
		case StatusPending:
		case StatusExpired:
			return ErrExpired
		default:
			return ErrNotPending
		}
		if nonceSt == nonceLapsed {
			return ErrScanLapsed
		}
		if err := end(txn, c); err != nil {
			return err
		}
		done = c
		return s.PutChallenge(txn, c)
	})
	if err != nil {
		return nil, err
	}
	if c, ok := s.outcomes[done.Purpose].(Committer); ok {
		c.Committed(ctx, done)
	}
	return done, nil
}
