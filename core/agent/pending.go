package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/palmgate/palmgate/storage"
)

// A count of open sessions is one record, the list of the sessions open under it
// with their expiry: an Init reads and rewrites it, and the end of a session takes
// the session out. Two concurrent Inits of one count therefore conflict on its key
// (and one counts again), while Inits of different counts share no key. A prefix scan
// of one key per session would count the same, but on PostgreSQL a serializable scan
// conflicts with every insert into the index pages it read, those of other devices'
// sessions too.

// pendingCount is one count of open sessions that a new one must stay within.
type pendingCount struct {
	key  []byte
	max  int
	what string
}

// pendingCounts returns the counts session is in: its (deviceId, key), and its
// address when the edge counts one.
func pendingCounts(session *Session) []pendingCount {
	counts := []pendingCount{{pendingKey(session.DeviceID, session.PublicKey), MaxPendingSessions, "this deviceId and publicKey"}}
	if session.Address != "" { // "" when the edge counts no address (rate_limit off)
		counts = append(counts, pendingCount{addressPendingKey(session.Address), MaxPendingSessionsPerAddress, "this client address"})
	}
	return counts
}

// openSession is an entry of a count: a session and when it expires (Unix ms).
type openSession struct {
	ID      string `json:"id"`
	Expires int64  `json:"exp"`
}

// openPending records session as open in each of its counts, refusing it when one
// already has its maximum of open sessions.
func (s *Service) openPending(txn storage.Txn, session *Session) error {
	now := s.now()
	for _, c := range pendingCounts(session) {
		open, err := readOpen(txn, c.key, now)
		if err != nil {
			return err
		}
		if len(open) >= c.max {
			return newError(ErrTooManyPending, CodeTooManyPendingInits,
				fmt.Sprintf("%s already has %d pending registration sessions; complete or let one expire", c.what, c.max))
		}
		open = append(open, openSession{ID: session.ID, Expires: time.Time(session.ExpiresAt).UnixMilli()})
		if err := writeOpen(txn, c.key, open, now); err != nil {
			return err
		}
	}
	return nil
}

// closePending takes session out of its counts.
func closePending(txn storage.Txn, session *Session, now time.Time) error {
	for _, c := range pendingCounts(session) {
		open, err := readOpen(txn, c.key, now)
		if err != nil {
			return err
		}
		open = slices.DeleteFunc(open, func(o openSession) bool { return o.ID == session.ID })
		if err := writeOpen(txn, c.key, open, now); err != nil {
			return err
		}
	}
	return nil
}

// readOpen returns the sessions of the count at key still open at now. A count
// written before counts were lists (an empty value) has none.
func readOpen(txn storage.Txn, key []byte, now time.Time) ([]openSession, error) {
	b, err := txn.Get(key)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case len(b) == 0:
		return nil, nil
	}
	var open []openSession
	if err := json.Unmarshal(b, &open); err != nil {
		return nil, fmt.Errorf("decoding the pending count %q: %w", key, err)
	}
	return slices.DeleteFunc(open, func(o openSession) bool { return o.Expires <= now.UnixMilli() }), nil
}

// writeOpen stores the count at key, kept until its last session expires; an
// empty one is deleted.
func writeOpen(txn storage.Txn, key []byte, open []openSession, now time.Time) error {
	var last int64
	for _, o := range open {
		last = max(last, o.Expires)
	}
	keep := time.UnixMilli(last).Sub(now)
	if len(open) == 0 || keep <= 0 {
		return txn.Delete(key)
	}
	b, err := json.Marshal(open)
	if err != nil {
		return err
	}
	return txn.Set(key, b, keep)
}
