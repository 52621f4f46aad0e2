package badgerstore

import (
	"context"
	"errors"
	"sync"

	"github.com/dgraph-io/badger/v4"

	"github.com/palmgate/palmgate/storage"
)

// Group commit.
//
// With synced writes Badger syncs its write-ahead log once per committed
// transaction, in its single writer goroutine, even when it writes several
// transactions at once (DB.writeToLSM); and every new transaction, read-only ones
// included, waits until the commits before it have been written (oracle.readTs).
// Under concurrent Updates each commit therefore queues behind the syncs of all
// the others, and so does every read.
//
// Update instead lets one goroutine at a time, the leader, run a group: the fns of
// every Update that arrived while the previous group was running, one after the
// other in one read-write transaction, then one synced commit for all of them. A
// group runs as soon as the previous one is done, so a lone Update waits for
// nothing, and the groups grow with the load. Running the fns in sequence in one
// transaction is a serial execution of them: each fn sees the writes of the ones
// before it, and the commit still detects conflicts with concurrent transactions.
//
// A fn that returns an error leaves the group, which runs again without it; it
// runs again on its own afterwards (its error came from a state that included
// writes that were never committed). A group whose commit fails, or a fn that
// panics, sends every member of the group to run on its own.

// maxGroup bounds the fns in one group, and so the work one commit waits for.
const maxGroup = 128

// group is the queue of Updates waiting for the next group commit.
type group struct {
	mu      sync.Mutex
	running bool         // a leader is running a group
	queue   []*groupCall // waiting, oldest first
}

// groupCall is one Update in the group queue. Its result fields are set by the
// leader before wake is closed.
type groupCall struct {
	ctx  context.Context
	fn   func(storage.Txn) error
	wake chan struct{} // closed when the call is done, or must lead

	lead       bool  // this call's goroutine runs the next group
	alone      bool  // the group failed this call: it must run in a transaction of its own
	ran        bool  // fn has run once (in a group that was not committed)
	conflicted bool  // alone because its own commit, alone in the group, conflicted
	err        error // fn's error or the commit's, when !alone
}

// commitGrouped queues fn for a group commit and returns once it is committed, has
// failed, or must run alone; the goroutine that finds no group running leads.
func (s *Store) commitGrouped(ctx context.Context, fn func(storage.Txn) error) *groupCall {
	c := &groupCall{ctx: ctx, fn: fn, wake: make(chan struct{})}
	g := &s.group
	g.mu.Lock()
	g.queue = append(g.queue, c)
	if g.running {
		g.mu.Unlock()
		<-c.wake
		if !c.lead {
			return c
		}
		g.mu.Lock()
	}
	// c leads. It is first in the queue: the queue is empty when no group runs,
	// and leadership passes to the oldest waiting call.
	g.running = true
	n := min(len(g.queue), maxGroup)
	calls := g.queue[:n:n]
	g.queue = append([]*groupCall(nil), g.queue[n:]...)
	g.mu.Unlock()

	s.runGroup(calls)

	g.mu.Lock()
	if len(g.queue) > 0 {
		next := g.queue[0]
		next.lead = true
		close(next.wake)
	} else {
		g.running = false
	}
	g.mu.Unlock()
	return c
}

// runGroup commits calls (calls[0] is the leader's own) and wakes every other call.
// It retries without each call whose fn fails, until the rest commit or none is left.
func (s *Store) runGroup(calls []*groupCall) {
	if s.obs != nil {
		s.obs.Group(len(calls))
	}
	defer func() {
		if p := recover(); p != nil {
			// A fn panicked: every call not done runs alone, the panicking one
			// in its own goroutine, where it panics again if it panics always.
			for _, c := range calls {
				if !c.alone { // not already counted as leaving the group
					s.fallback(storage.FallbackPanic)
				}
				c.alone = true
			}
		}
		for _, c := range calls[1:] {
			close(c.wake)
		}
	}()
	pending := calls
	for len(pending) > 0 {
		failed, committed := s.attemptGroup(pending)
		if committed {
			return
		}
		if failed < 0 {
			// The commit failed. A lone call has its result (alone on a
			// conflict, else the commit's error); several calls run alone.
			if len(pending) > 1 {
				for _, c := range pending {
					c.alone = true
					s.fallback(storage.FallbackFailedGroup)
				}
			}
			return
		}
		pending = append(pending[:failed:failed], pending[failed+1:]...)
	}
}

// attemptGroup runs the fns of calls in order in one transaction and commits it.
// It returns committed when it did, setting every call's result. Otherwise failed
// is the index of the call that left the group (its result set: alone, or an error
// when it is the only call), or -1 when the commit failed (results set only for a
// lone call whose commit failed other than by a conflict).
func (s *Store) attemptGroup(calls []*groupCall) (failed int, committed bool) {
	s.writeMu.RLock()
	defer s.writeMu.RUnlock()
	btx := s.db.NewTransaction(true)
	defer btx.Discard()
	lone := len(calls) == 1
	var touched storage.Touched
	for i, c := range calls {
		if err := c.ctx.Err(); err != nil {
			c.alone = true // updateAlone returns the context's error
			return i, false
		}
		tx := &txn{btx: btx, watches: &s.watches, touched: &touched}
		c.ran = true
		err := c.fn(tx)
		tx.done = true
		if err != nil {
			if lone {
				c.err = err // its own transaction: the error stands
			} else {
				c.alone = true
				s.fallback(storage.FallbackError)
			}
			return i, false
		}
	}
	err := btx.Commit()
	s.reads.retire()
	if err != nil {
		if lone {
			if errors.Is(err, badger.ErrConflict) {
				calls[0].alone, calls[0].conflicted = true, true
			} else {
				calls[0].err = mapErr("commit", err)
			}
		}
		return -1, false
	}
	touched.Committed() // after retire: a View begun from now on reads a snapshot with these writes
	for _, c := range calls {
		c.err = nil
	}
	return 0, true
}

// fallback reports to the observer, if any, that a member of a group runs alone.
func (s *Store) fallback(reason storage.Fallback) {
	if s.obs != nil {
		s.obs.GroupFallback(reason)
	}
}
