package palm

import (
	"context"
	"time"

	"github.com/palmgate/palmgate/core/jsontime"
	"github.com/palmgate/palmgate/storage"
)

// A scan URL (the QR code a page shows) is short-lived, so that a QR code relayed
// from the page to somebody else's phone soon stops working: the cross-device
// phishing mitigation of RFC 8628 §5.4. The page that shows it renews it while it
// is open; the replaced URL then answers ErrScanLapsed.
const (
	// ScanLifetime is how long a scan URL can be opened after it was issued.
	ScanLifetime = 2 * time.Minute
	// ScanRenewAfter is the age from which an open page gets a new scan URL, so the
	// QR it shows always has at least ScanLifetime-ScanRenewAfter left.
	ScanRenewAfter = time.Minute
	// scanCompletionGrace is how long after a scan URL lapses the app may still post
	// the assertion or the denial for it: the person opened it in time and is
	// holding their palm over the phone.
	scanCompletionGrace = time.Minute
	// maxReplacedNonces bounds the replaced nonces a challenge remembers; renewals
	// are at most one per ScanRenewAfter, so 16 covers any challenge's lifetime.
	maxReplacedNonces = 16
)

// replacedNonce is a scan nonce that a renewal replaced.
type replacedNonce struct {
	Nonce    string    `json:"n"`
	IssuedAt time.Time `json:"at"`
}

// nonceState says how nonce relates to the challenge at now: current and open,
// usable to complete (current or recently replaced, within the grace), lapsed or
// replaced (known but no longer usable), or unknown.
type nonceState int

const (
	nonceUnknown     nonceState = iota
	nonceLapsed                 // known, too old to be used at all
	nonceCompletable            // may still complete the challenge, not be opened
	nonceOpen                   // the current scan URL, within its lifetime
)

func (c *Challenge) nonceState(nonce string, now time.Time) nonceState {
	if nonceEqual(c.Nonce, nonce) {
		switch {
		case now.Before(time.Time(c.ScanExpiresAt)):
			return nonceOpen
		case now.Before(time.Time(c.ScanExpiresAt).Add(scanCompletionGrace)):
			return nonceCompletable
		}
		return nonceLapsed
	}
	for _, r := range c.replaced {
		if nonceEqual(r.Nonce, nonce) {
			if now.Before(r.IssuedAt.Add(ScanLifetime + scanCompletionGrace)) {
				return nonceCompletable
			}
			return nonceLapsed
		}
	}
	return nonceUnknown
}

// Renew gives challenge id a new scan URL when the current one is older than
// ScanRenewAfter and the challenge is still pending, and returns the challenge.
// Pages call it each time they are shown or polled; it writes at most once per
// ScanRenewAfter.
func (s *Service) Renew(ctx context.Context, id string) (*Challenge, error) {
	c, err := s.read(ctx, id)
	if err != nil {
		return nil, err
	}
	now := s.now()
	if !c.renewDue(now) {
		c.Status = c.StatusAt(now)
		return c, nil
	}
	nonce, err := newNonce()
	if err != nil {
		return nil, err
	}
	err = s.store.Update(ctx, func(txn storage.Txn) error {
		var err error
		if c, err = GetChallenge(txn, id); err != nil {
			return err
		}
		if !c.renewDue(now) {
			return nil // another page renewed it meanwhile, or it ended
		}
		c.replaced = append(c.replaced, replacedNonce{Nonce: c.Nonce, IssuedAt: c.scanIssuedAt})
		if len(c.replaced) > maxReplacedNonces {
			c.replaced = c.replaced[len(c.replaced)-maxReplacedNonces:]
		}
		c.Nonce, c.scanIssuedAt, c.ScanExpiresAt = nonce, now, scanExpiry(now, c.ExpiresAt)
		return s.PutChallenge(txn, c)
	})
	if err != nil {
		return nil, err
	}
	c.Status = c.StatusAt(now)
	return c, nil
}

// renewDue reports whether a pending challenge's scan URL is old enough to renew.
func (c *Challenge) renewDue(now time.Time) bool {
	return c.StatusAt(now) == StatusPending && now.Sub(c.scanIssuedAt) >= ScanRenewAfter
}

// scanExpiry is when a scan URL issued at now lapses: ScanLifetime later, or when
// the challenge expires if that is sooner.
func scanExpiry(now time.Time, challengeExpiry jsontime.Time) jsontime.Time {
	t := now.Add(ScanLifetime).UTC()
	if end := time.Time(challengeExpiry); end.Before(t) {
		t = end
	}
	return jsontime.Time(t)
}
