package agent

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/core/records"
	"github.com/palmgate/palmgate/storage"
)

// An owner session is a browser's palm-verified visit to the agents page, where a
// person sees the agents registered to them and removes them. The browser holds
// a random secret (in a cookie); the store holds the session under the secret's
// hash, so what the store (or a backup) holds cannot be replayed as a cookie. It
// starts pending with a palm challenge of purpose PurposeAgentManagement; the
// person's verified palm makes it name their human for OwnerSessionTTL. It lives
// on the server only, so it can be ended (EndOwnerSession) before then.
const (
	// OwnerChallengeTTL is how long the palm challenge of an owner session stays
	// open.
	OwnerChallengeTTL = 5 * time.Minute
	// OwnerSessionTTL is how long a verified owner session lasts.
	OwnerSessionTTL = 10 * time.Minute
)

// OwnerStatus is the state of an owner session.
type OwnerStatus string

// The states of an owner session.
const (
	OwnerPending  OwnerStatus = "pending"
	OwnerVerified OwnerStatus = "verified"
	OwnerDenied   OwnerStatus = "denied"
	OwnerExpired  OwnerStatus = "expired"
)

// ErrOwnerSessionNotFound is the fault of a missing, ended or malformed owner
// session secret.
var ErrOwnerSessionNotFound = &fault.Error{Class: fault.NotFound, Code: "owner_session_not_found", Message: "no agents page session: open the page again and verify with your palm"}

// OwnerSession is an owner's session on the agents page.
type OwnerSession struct {
	ChallengeID string      `json:"challengeId"`
	Status      OwnerStatus `json:"status"`
	// HumanID is the verified human, once Status is verified.
	HumanID string `json:"humanId,omitempty"`
	// CSRF is the token the page's forms carry: a form post is honoured only with
	// the session's own.
	CSRF      string `json:"csrf"`
	ExpiresAt Time   `json:"expiresAt"`
}

// StatusAt is the session's status at now.
func (o *OwnerSession) StatusAt(now time.Time) OwnerStatus {
	if (o.Status == OwnerPending || o.Status == OwnerVerified) && !now.Before(time.Time(o.ExpiresAt)) {
		return OwnerExpired
	}
	return o.Status
}

// CheckCSRF reports whether token is the session's CSRF token.
func (o *OwnerSession) CheckCSRF(token string) bool {
	return o.CSRF != "" && subtle.ConstantTimeCompare([]byte(o.CSRF), []byte(token)) == 1
}

// ownerRef is the store's name of the session whose browser holds secret.
func ownerRef(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// validOwnerSecret reports whether secret has the form StartOwnerSession gives.
func validOwnerSecret(secret string) bool {
	if len(secret) != 43 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(secret)
	return err == nil
}

func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating owner session secret: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// StartOwnerSession opens an owner session for the browser described by req (its
// address, IP and summary, shown to the person's palm app) and returns the secret
// the browser keeps, the session and its palm challenge.
func (s *Service) StartOwnerSession(ctx context.Context, req palm.Request) (string, *OwnerSession, *palm.Challenge, error) {
	secret, err := randomToken()
	if err != nil {
		return "", nil, nil, err
	}
	csrf, err := randomToken()
	if err != nil {
		return "", nil, nil, err
	}
	req.RequestedAt = Time(s.now().UTC())
	ref := ownerRef(secret)
	ch, err := s.palm.New(palm.PurposeAgentManagement, ref, req, OwnerChallengeTTL)
	if err != nil {
		return "", nil, nil, err
	}
	o := &OwnerSession{ChallengeID: ch.ID, Status: OwnerPending, CSRF: csrf, ExpiresAt: ch.ExpiresAt}
	err = s.store.Update(ctx, func(txn storage.Txn) error {
		if err := s.putOwnerSession(txn, ref, o); err != nil {
			return err
		}
		return s.palm.PutChallenge(txn, ch)
	})
	if err != nil {
		return "", nil, nil, err
	}
	return secret, o, ch, nil
}

// OwnerSession returns the session of secret with its status as of now, or
// ErrOwnerSessionNotFound.
func (s *Service) OwnerSession(ctx context.Context, secret string) (*OwnerSession, error) {
	if !validOwnerSecret(secret) {
		return nil, ErrOwnerSessionNotFound
	}
	o, err := records.Read[OwnerSession](ctx, s.store, ownerSessionKey(ownerRef(secret)), ErrOwnerSessionNotFound, "owner session")
	if err != nil {
		return nil, err
	}
	o.Status = o.StatusAt(s.now())
	return o, nil
}

// OwnerChallenge returns the palm challenge of a pending owner session, its scan
// URL renewed when due unless renew is false.
func (s *Service) OwnerChallenge(ctx context.Context, o *OwnerSession, renew bool) (*palm.Challenge, error) {
	if renew {
		return s.palm.Renew(ctx, o.ChallengeID)
	}
	c, err := palm.ReadChallenge(ctx, s.store, o.ChallengeID)
	if err != nil {
		return nil, err
	}
	c.Status = c.StatusAt(s.now())
	return c, nil
}

// EndOwnerSession ends the session of secret (signing out of the agents page);
// ending one that is gone is no error.
func (s *Service) EndOwnerSession(ctx context.Context, secret string) error {
	if !validOwnerSecret(secret) {
		return nil
	}
	return s.store.Update(ctx, func(txn storage.Txn) error {
		return txn.Delete(ownerSessionKey(ownerRef(secret)))
	})
}

// putOwnerSession stores o under ref until it expires (a pending or ended one a
// little longer, so that the page's poll sees how it ended).
func (s *Service) putOwnerSession(txn storage.Txn, ref string, o *OwnerSession) error {
	b, err := json.Marshal(o)
	if err != nil {
		return fmt.Errorf("encoding owner session: %w", err)
	}
	ttl := time.Time(o.ExpiresAt).Sub(s.now())
	if o.Status != OwnerVerified {
		ttl += time.Minute
	}
	return txn.Set(ownerSessionKey(ref), b, max(ttl, time.Second))
}

// ownerOutcome ends owner sessions when their palm challenge ends.
type ownerOutcome struct{ s *Service }

// Verified makes the session name humanID for OwnerSessionTTL.
// The session is indexed by its human (agent/oh/), for EndHumanOwnerSessions.
func (o ownerOutcome) Verified(txn storage.Txn, c *palm.Challenge, humanID string) error {
	verified := false
	err := o.end(txn, c, func(sess *OwnerSession) {
		sess.Status, sess.HumanID = OwnerVerified, humanID
		sess.ExpiresAt = Time(o.s.now().Add(OwnerSessionTTL).UTC())
		verified = true
	})
	if err != nil || !verified {
		return err
	}
	return txn.Set(humanOwnerSessionKey(humanID, c.Ref), nil, OwnerSessionTTL)
}

// EndHumanOwnerSessions ends, in txn, every verified agents-page session of
// humanID (an operator ending the person, oidc.Service.EndHuman's Also), on every
// instance at once (each page request reads its session from the store), and
// counts the live ones. Sessions verified before the index existed are not found:
// they last OwnerSessionTTL at most.
func (s *Service) EndHumanOwnerSessions(txn storage.Txn, humanID string) (int, error) {
	prefix := humanOwnerSessionPrefix(humanID)
	var refs []string
	if err := txn.IterateKeys(prefix, func(k []byte) (bool, error) {
		refs = append(refs, string(k[len(prefix):]))
		return true, nil
	}); err != nil {
		return 0, err
	}
	n := 0
	now := s.now()
	for _, ref := range refs {
		sess, err := records.Get[OwnerSession](txn, ownerSessionKey(ref), ErrOwnerSessionNotFound, "owner session")
		switch {
		case errors.Is(err, ErrOwnerSessionNotFound):
		case err != nil:
			return 0, err
		case sess.HumanID == humanID:
			if sess.StatusAt(now) == OwnerVerified {
				n++
			}
			if err := txn.Delete(ownerSessionKey(ref)); err != nil {
				return 0, err
			}
		}
		if err := txn.Delete(humanOwnerSessionKey(humanID, ref)); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// Denied closes the session.
func (o ownerOutcome) Denied(txn storage.Txn, c *palm.Challenge) error {
	return o.end(txn, c, func(sess *OwnerSession) { sess.Status = OwnerDenied })
}

func (o ownerOutcome) end(txn storage.Txn, c *palm.Challenge, change func(*OwnerSession)) error {
	sess, err := records.Get[OwnerSession](txn, ownerSessionKey(c.Ref), ErrOwnerSessionNotFound, "owner session")
	if errors.Is(err, ErrOwnerSessionNotFound) {
		return nil // ended (signed out) before the palm answered
	}
	if err != nil {
		return err
	}
	if sess.Status != OwnerPending {
		return nil
	}
	change(sess)
	return o.s.putOwnerSession(txn, c.Ref, sess)
}
