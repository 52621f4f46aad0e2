// Package agent is the agent registry: an agent proves control of an Ed25519 key, a
// human owner completes a palm verification, and anyone can verify signatures, look
// agents up and read the leaderboard of humans by agent count.
package agent

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/jsontime"
	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/core/records"
	"github.com/palmgate/palmgate/storage"
)

// Bounds of open registration sessions. They are counted per (deviceId, public
// key), so that sessions opened for a victim's deviceId with throwaway keys do not
// lock out the real agent, and per client address, so that one address cannot open
// them without end (palm.Service caps them all).
const (
	MaxPendingSessions           = 32
	MaxPendingSessionsPerAddress = 128
)

// Time is the JSON time of registry answers.
type Time = jsontime.Time

// SessionStatus is the state of a registration session.
type SessionStatus string

// The states of a registration session.
const (
	SessionPending   SessionStatus = "pending"
	SessionCompleted SessionStatus = "completed"
	SessionExpired   SessionStatus = "expired"
	SessionFailed    SessionStatus = "failed"
)

// Session is a registration session: created by init, ended by the owner's palm
// verification (or its denial, or time).
type Session struct {
	ID        string `json:"id"`
	DeviceID  string `json:"deviceId"`
	PublicKey string `json:"publicKey"`
	// Address is the client address that opened the session (an IPv6 one as its
	// /64), which counts its open sessions.
	Address      string        `json:"address,omitempty"`
	Status       SessionStatus `json:"status"`
	ChallengeID  string        `json:"challengeId"`
	ExpiresAt    Time          `json:"expiresAt"`
	RegisteredAt Time          `json:"registeredAt,omitzero"`
}

// StatusAt is the session's status at time now.
func (s *Session) StatusAt(now time.Time) SessionStatus {
	if s.Status == SessionPending && !now.Before(time.Time(s.ExpiresAt)) {
		return SessionExpired
	}
	return s.Status
}

// Registered is a registered agent.
type Registered struct {
	PublicKey    string `json:"publicKey"`
	HumanID      string `json:"humanId"`
	RegisteredAt Time   `json:"registeredAt"`
}

// humanStats is what the leaderboard knows of one human.
type humanStats struct {
	AgentCount int64     `json:"agentCount"`
	Earliest   time.Time `json:"earliest"`
}

// Service is the agent registry.
type Service struct {
	store           storage.Store
	palm            *palm.Service
	now             func() time.Time
	issuer          string
	sessionTTL      time.Duration
	challengeMaxAge time.Duration
	board           leaderboardCache
	registeredKeys  registeredKeys   // deviceIds of keys found registered
	registered      registeredAgents // records of agents found registered
	validKeys       validKeys        // keys CheckPublicKey accepted
	absent          absentKeys       // keys found registered to no agent (exact; absentkeys.go)
	fresh           *freshness       // whether the two caches above may be answered from
	events          event.Sink
	onRemoved       RemovedHook // removed_hook.go
}

// Config builds a Service.
type Config struct {
	Store storage.Store
	Palm  *palm.Service
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Issuer is the public base URL, used to build registration URLs.
	Issuer string
	// SessionTTL is the lifetime of a registration session.
	SessionTTL time.Duration
	// ChallengeMaxAge is the accepted age of challenge timestamps, both directions.
	ChallengeMaxAge time.Duration
	// Events receives registrations and signature checks (event.Registration,
	// event.SignatureCheck); nil: none.
	Events event.Sink
}

// NewService builds the registry and registers its palm challenge outcome.
func NewService(cfg Config) *Service {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	s := &Service{
		store: cfg.Store, palm: cfg.Palm, now: now, issuer: cfg.Issuer,
		sessionTTL: cfg.SessionTTL, challengeMaxAge: cfg.ChallengeMaxAge, events: cfg.Events,
	}
	s.fresh = newFreshness(cfg.Store, now, func() { s.registeredKeys.clear(); s.registered.clear() })
	s.registeredKeys.epoch, s.registered.epoch = &s.fresh.epoch, &s.fresh.epoch
	s.absent.watchKeyIndex(cfg.Store)
	cfg.Palm.Handle(palm.PurposeAgentRegistration, outcome{s})
	cfg.Palm.Handle(palm.PurposeAgentManagement, ownerOutcome{s})
	return s
}

// RegistrationURL is the page where the human owner completes session id.
func (s *Service) RegistrationURL(id string) string {
	return s.issuer + "/v1/agent/register/" + id + "/verify"
}

// Init starts a registration for a client at address: it checks the challenge's
// registration form, age and signature, refuses a replayed message, an already
// registered deviceId or key and too many open sessions, and stores the session and
// its palm challenge in one transaction.
func (s *Service) Init(ctx context.Context, c *Challenge, address string) (*Session, error) {
	now := s.now()
	if err := c.checkRegistrationForm(now, s.challengeMaxAge); err != nil {
		return nil, err
	}
	session := &Session{
		ID:        uuid.NewString(),
		DeviceID:  c.DeviceID,
		PublicKey: EncodePublicKey(c.PublicKey),
		Address:   address,
		Status:    SessionPending,
		ExpiresAt: Time(now.Add(s.sessionTTL).UTC()),
	}
	ch, err := s.palm.New(palm.PurposeAgentRegistration, session.ID, palm.Request{DeviceID: c.DeviceID, KeyFingerprint: Fingerprint(c.PublicKey), Address: address}, s.sessionTTL)
	if err != nil {
		return nil, err
	}
	session.ChallengeID = ch.ID
	// Init reads these, and so will the outcome, with the session: one round
	// trip, not two.
	ch.Reads = admissionKeys(session, c.PublicKey)
	replay := replayKey(messageSum(c))
	err = s.store.Update(ctx, func(txn storage.Txn) error {
		// Every key read below, in one go.
		if err := storage.Prefetch(txn, append([][]byte{replay}, ch.Reads...)...); err != nil {
			return err
		}
		if _, err := txn.Get(replay); err == nil {
			return newError(ErrInvalid, CodeReplayed, "this signed message was already used")
		} else if !errors.Is(err, storage.ErrNotFound) {
			return err
		}
		if err := checkUnregistered(txn, c.DeviceID, c.PublicKey); err != nil {
			return err
		}
		if err := s.openPending(txn, session); err != nil {
			return err
		}
		// The marker outlives every timestamp the age window still accepts.
		if err := txn.Set(replay, nil, 2*s.challengeMaxAge+time.Minute); err != nil {
			return err
		}
		if err := s.putSession(txn, session); err != nil {
			return err
		}
		return s.palm.PutChallenge(txn, ch)
	})
	if err != nil {
		if errors.Is(err, ErrInvalid) || errors.Is(err, ErrAlreadyRegistered) || errors.Is(err, ErrTooManyPending) {
			// Refused by fn, so nothing committed: the challenge is on no disk and
			// must not hold a place under the pending caps for its lifetime.
			s.palm.Release(ch)
		}
		return nil, err
	}
	s.events.Emit(ctx, event.Event{Kind: event.Registration, Outcome: event.Started,
		DeviceID: session.DeviceID, KeyFingerprint: ch.Request.KeyFingerprint})
	return session, nil
}

func messageSum(c *Challenge) []byte {
	h := sha256.New()
	h.Write(c.PublicKey)
	h.Write([]byte(c.Message))
	return h.Sum(nil)
}

// admissionKeys are the keys that opening or closing session reads besides the
// session itself: its device and key (checkUnregistered) and its pending counts.
func admissionKeys(session *Session, key []byte) [][]byte {
	keys := [][]byte{deviceKey(session.DeviceID), publicKeyKey(key)}
	for _, pc := range pendingCounts(session) {
		keys = append(keys, pc.key)
	}
	return keys
}

// checkUnregistered returns ErrAlreadyRegistered when the device or key is taken.
func checkUnregistered(txn storage.Txn, deviceID string, key []byte) error {
	for _, k := range [][]byte{deviceKey(deviceID), publicKeyKey(key)} {
		_, err := txn.Get(k)
		if err == nil {
			return newError(ErrAlreadyRegistered, CodeAlreadyRegistered, "an agent with this deviceId or publicKey is already registered")
		}
		if !errors.Is(err, storage.ErrNotFound) {
			return err
		}
	}
	return nil
}

// Session returns a registration session with its status as of now.
func (s *Service) Session(ctx context.Context, id string) (*Session, error) {
	if !validSessionID(id) {
		return nil, errSessionNotFound()
	}
	session, err := records.Read[Session](ctx, s.store, sessionKey(id), errSessionNotFound(), "registration session")
	if err != nil {
		return nil, err
	}
	session.Status = session.StatusAt(s.now())
	return session, nil
}

// Challenge returns the palm challenge of a session, for the owner's page, with
// its scan URL renewed when due unless renew is false.
func (s *Service) Challenge(ctx context.Context, session *Session, renew bool) (*palm.Challenge, error) {
	if renew {
		return s.palm.Renew(ctx, session.ChallengeID)
	}
	c, err := palm.ReadChallenge(ctx, s.store, session.ChallengeID)
	if err != nil {
		return nil, err
	}
	c.Status = c.StatusAt(s.now())
	return c, nil
}

func getSession(txn storage.Txn, id string) (*Session, error) {
	if !validSessionID(id) {
		return nil, errSessionNotFound()
	}
	return records.Get[Session](txn, sessionKey(id), errSessionNotFound(), "registration session")
}

// validSessionID reports whether id has the form of a session id, a UUID.
func validSessionID(id string) bool {
	_, err := uuid.Parse(id)
	return err == nil && len(id) == 36
}

func errSessionNotFound() error {
	return newError(ErrSessionNotFound, CodeSessionNotFound, "registration session not found")
}

// putSession stores session, kept as palm.KeepFor says: a completed one a day, an
// unfinished one briefly past its expiry.
func (s *Service) putSession(txn storage.Txn, session *Session) error {
	b, err := json.Marshal(session)
	if err != nil {
		return fmt.Errorf("encoding registration session: %w", err)
	}
	return txn.Set(sessionKey(session.ID), b, palm.KeepFor(s.now(), time.Time(session.ExpiresAt), session.Status == SessionCompleted))
}

// outcome ends registration sessions when their palm challenge ends.
type outcome struct{ s *Service }

// Verified registers the session's agent under humanID, unless its deviceId or key
// was registered meanwhile, or its key is no longer accepted, which fails the
// session.
func (o outcome) Verified(txn storage.Txn, c *palm.Challenge, humanID string) error {
	// With the session, the keys its Init named (c.Reads): the prefetch of
	// admissionKeys below then finds them read. A challenge written before the
	// hints existed has none, and that prefetch reads them.
	if err := storage.Prefetch(txn, append([][]byte{sessionKey(c.Ref), humanKey(humanID)}, c.Reads...)...); err != nil {
		return err
	}
	session, err := getSession(txn, c.Ref)
	if err != nil {
		return err
	}
	if session.Status != SessionPending {
		return nil
	}
	now := o.s.now().UTC()
	key, err := ParsePublicKey(session.PublicKey)
	if err == nil {
		// The keys read below (normally read already, with the session).
		if err := storage.Prefetch(txn, admissionKeys(session, key)...); err != nil {
			return err
		}
		err = checkUnregistered(txn, session.DeviceID, key)
	}
	switch {
	case errors.Is(err, ErrInvalid):
		// A key refused since the session began (a weak key, before keys were
		// checked): it is never registered.
		session.Status, c.Outcome = SessionFailed, event.Failed
	case errors.Is(err, ErrAlreadyRegistered):
		session.Status, c.Outcome = SessionFailed, event.Failed
	case err != nil:
		return err
	default:
		if err := register(txn, session.DeviceID, key, Registered{PublicKey: session.PublicKey, HumanID: humanID, RegisteredAt: Time(now)}); err != nil {
			return err
		}
		session.Status, session.RegisteredAt, c.Outcome = SessionCompleted, Time(now), event.Verified
	}
	if err := closePending(txn, session, o.s.now()); err != nil {
		return err
	}
	return o.s.putSession(txn, session)
}

// Committed drops the cached leaderboard once a verified registration has
// committed, and tells the sink how the registration ended.
func (o outcome) Committed(ctx context.Context, c *palm.Challenge) {
	if c.Status == palm.StatusVerified {
		o.s.board.gen.Add(1)
	}
	if c.Outcome != event.None {
		o.s.events.Emit(ctx, event.Event{Kind: event.Registration, Outcome: c.Outcome, HumanID: c.HumanID,
			DeviceID: c.Request.DeviceID, KeyFingerprint: c.Request.KeyFingerprint})
	}
}

// Denied fails the session.
func (o outcome) Denied(txn storage.Txn, c *palm.Challenge) error {
	session, err := getSession(txn, c.Ref)
	if err != nil {
		return err
	}
	if session.Status != SessionPending {
		return nil
	}
	session.Status, c.Outcome = SessionFailed, event.Denied
	if err := closePending(txn, session, o.s.now()); err != nil {
		return err
	}
	return o.s.putSession(txn, session)
}

// register writes the agent, its key index (with a copy of the record, so that a
// lookup by key is one read), its entry among the human's agents and the human's
// leaderboard entry.
func register(txn storage.Txn, deviceID string, key []byte, r Registered) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := txn.Set(deviceKey(deviceID), b, 0); err != nil {
		return err
	}
	if err := txn.Set(publicKeyKey(key), keyIndexValue(deviceID, b), 0); err != nil {
		return err
	}
	if err := txn.Set(humanAgentKey(r.HumanID, deviceID), b, 0); err != nil {
		return err
	}
	var stats humanStats
	switch b, err := txn.Get(humanKey(r.HumanID)); {
	case err == nil:
		if err := json.Unmarshal(b, &stats); err != nil {
			return fmt.Errorf("decoding human %s: %w", r.HumanID, err)
		}
		if err := txn.Delete(leaderboardKey(stats, r.HumanID)); err != nil {
			return err
		}
	case errors.Is(err, storage.ErrNotFound):
		stats.Earliest = time.Time(r.RegisteredAt)
	default:
		return err
	}
	// The earliest of the human's registrations, as a removal recomputes it: an
	// instance whose clock runs behind another's (or a clock stepped back) may
	// register a later agent at an earlier time.
	if t := time.Time(r.RegisteredAt); t.Before(stats.Earliest) {
		stats.Earliest = t
	}
	stats.AgentCount++
	if b, err = json.Marshal(stats); err != nil {
		return err
	}
	if err := txn.Set(humanKey(r.HumanID), b, 0); err != nil {
		return err
	}
	return txn.Set(leaderboardKey(stats, r.HumanID), nil, 0)
}
