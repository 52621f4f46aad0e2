package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/palmgate/palmgate/storage"
)

// Grouped Updates. A round trip costs palmgate and PostgreSQL more than the
// statements it carries, so under load concurrent Updates of this instance share
// one SERIALIZABLE transaction, as Badger's grouped commits share one write:
// their fns run side by side, each seeing the transaction's snapshot and its own
// writes (not the other members'); each round of the reads they ask for goes to
// the database as one statement, and the writes of the group go as one INSERT and
// one DELETE with one COMMIT.
//
// The outcome is one of running the members one after the other: a member whose
// reads or writes meet another member's writes leaves the group and runs alone
// afterwards, so that the members that commit together neither read nor write
// what another of them writes. Those that only read (or whose fn failed) come
// first in that order, having seen the state before every write of the group; the
// writers follow in any order, none depending on another. A member that iterates
// (a range read) runs alone too, as does every member of a group whose
// transaction fails: the group is an optimisation and never an outcome. A
// member whose context ends before the group commits leaves it: its reads and
// writes fail with the context's error from then on, none of its writes
// commit, and its Update returns that error.
//
// At most maxGroups groups run at once. An Update that finds fewer running
// leads a group of itself and the Updates queued by then; one that finds them all
// running waits in the queue for the next group. Without load every group has one
// member, which runs as a plain Update.

// maxGroupSize bounds the members of a group: each adds its reads and writes to
// the group's statements and its conflicts to the group's odds of failing. The
// bound in force (Store.groupLimit) adapts: it grows by one with each group that
// commits and halves with each that fails, so that groups shrink while they keep
// failing (several instances' groups conflicting with each other, say) and grow
// back when they stop.
const maxGroupSize = 32

// maxGroups is how many groups run at once. One: the members of a group already
// run side by side, and two groups at once, each reading and writing many keys,
// conflicted in most of their commits (serialization failures), which cost more
// than the groups saved (docs/PERFORMANCE.md).
const maxGroups = 1

// errLeftGroup is what a member's Iterate returns: the member runs alone instead.
var errLeftGroup = errors.New("pgstore: the update runs alone")

// grouping is the queue of Updates waiting for a group.
type grouping struct {
	mu      sync.Mutex
	queue   []*groupCall
	running int // groups running
}

// groupCall is one Update passing through a group.
type groupCall struct {
	ctx  context.Context
	fn   func(storage.Txn) error
	wake chan struct{} // closed when the call has its outcome, or leads
	lead bool

	outcome  callOutcome
	err      error            // of callDone
	panicked any              // of callPanic
	fallback storage.Fallback // why it runs alone, when it leaves a group ("": the group failed)
}

type callOutcome int

const (
	callAlone  callOutcome = iota // to be run as a plain Update
	callDone                      // err is the Update's result
	callPanic                     // fn panicked with panicked
	callGoexit                    // fn called runtime.Goexit
)

// result is the call's Update result, running it alone when the group did not
// decide it.
func (c *groupCall) result(s *Store) error {
	switch c.outcome {
	case callDone:
		return c.err
	case callPanic:
		panic(c.panicked)
	case callGoexit:
		runtime.Goexit()
	}
	return s.update(c.ctx, c.fn)
}

// updateGrouped runs fn in a group (see above).
func (s *Store) updateGrouped(ctx context.Context, fn func(storage.Txn) error) error {
	c := &groupCall{ctx: ctx, fn: fn, wake: make(chan struct{})}
	g := &s.group
	g.mu.Lock()
	if g.running >= maxGroups {
		g.queue = append(g.queue, c)
		g.mu.Unlock()
		select {
		case <-c.wake:
		case <-ctx.Done():
			g.mu.Lock()
			if i := slices.Index(g.queue, c); i >= 0 { // still waiting: it leaves
				g.queue = slices.Delete(g.queue, i, i+1)
				g.mu.Unlock()
				return fmt.Errorf("pgstore: update: %w", ctx.Err())
			}
			g.mu.Unlock()
			<-c.wake // a group has it
		}
		if !c.lead {
			return c.result(s)
		}
		g.mu.Lock()
	} else {
		g.running++
	}
	// c leads a group of itself and the calls queued until now.
	n := min(len(g.queue), int(s.groupLimit.Load())-1)
	calls := append([]*groupCall{c}, g.queue[:n]...)
	g.queue = append([]*groupCall(nil), g.queue[n:]...)
	g.mu.Unlock()

	func() {
		defer s.handOff() // even when c's fn panics alone
		s.runGroup(calls)
	}()
	return c.result(s)
}

// handOff ends a group's turn: the oldest queued call leads the next group.
func (s *Store) handOff() {
	g := &s.group
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) == 0 {
		g.running--
		return
	}
	next := g.queue[0]
	g.queue = g.queue[1:]
	next.lead = true
	close(next.wake)
}

// runGroup decides the outcome of calls (calls[0] is the leader's own) and wakes
// every other call.
func (s *Store) runGroup(calls []*groupCall) {
	defer func() {
		for _, c := range calls[1:] {
			close(c.wake)
		}
	}()
	var live []*groupCall
	for _, c := range calls {
		if err := c.ctx.Err(); err != nil {
			c.outcome, c.err = callDone, fmt.Errorf("pgstore: update: %w", err)
			continue
		}
		live = append(live, c)
	}
	if s.obs != nil && len(live) > 0 {
		s.obs.Group(len(live))
	}
	switch {
	case len(live) == 0:
		return
	case len(live) == 1 && live[0] != calls[0]:
		return // it runs alone, in its own goroutine: fn may panic
	case len(live) == 1:
		// The leader's first attempt, in the group's turn, so that the Updates
		// arriving meanwhile queue for the next group; retries (and their
		// pauses) run outside it.
		c := live[0]
		retry, err := s.attempt(c.ctx, c.fn, false)
		if retry == noRetry {
			c.outcome, c.err = callDone, err
		} else {
			s.retries.Add(1)
			if retry == retryConflict {
				s.conflictRetry()
			}
		}
		return
	}
	if s.commitGroup(live) {
		s.groupLimit.Store(min(s.groupLimit.Load()+1, maxGroupSize))
	} else {
		s.groupLimit.Store(max(s.groupLimit.Load()/2, 2))
	}
	if s.obs != nil {
		for _, c := range live {
			if c.outcome != callAlone {
				continue
			}
			reason := c.fallback
			if reason == "" {
				reason = storage.FallbackFailedGroup
			}
			s.obs.GroupFallback(reason)
		}
	}
}

// commitGroup runs calls as one group and reports whether its transaction
// committed. The calls it decides nothing for run alone.
func (s *Store) commitGroup(calls []*groupCall) bool {
	s.writeMu.RLock()
	defer s.writeMu.RUnlock()
	tx, err := s.newTxn(context.Background(), beginUpdate, false)
	if err != nil {
		return false // every call runs alone, and meets the error itself
	}
	defer tx.end()
	s.groups.Add(1)
	members := s.runMembers(tx, calls)
	for _, m := range members {
		switch {
		case m.didPanic:
			m.c.outcome, m.c.panicked = callPanic, m.panicked
		case m.goexit:
			m.c.outcome = callGoexit
		}
	}
	if tx.err != nil {
		return false
	}
	readers, writers := s.admit(members)
	for _, m := range writers {
		for _, w := range m.writes {
			if err := tx.keep(w.key, w.value, w.micros); err != nil {
				return false
			}
		}
	}
	if s.groupCommitHook != nil {
		s.groupCommitHook(tx)
	}
	if err := tx.commit(); err != nil {
		if errors.Is(err, storage.ErrUnavailable) {
			// The commit may have happened: the writers must not run again.
			for _, m := range writers {
				m.c.outcome, m.c.err = callDone, fmt.Errorf("%w (the transaction may or may not have committed)", err)
			}
		}
		return false
	}
	for _, m := range append(readers, writers...) {
		m.c.outcome, m.c.err = callDone, nil
	}
	s.grouped.Add(uint64(len(writers)))
	return true
}

// runMembers runs the fns of calls side by side on tx, sending each round of the
// reads they ask for as one Prefetch, until every fn has returned.
func (s *Store) runMembers(tx *txn, calls []*groupCall) []*member {
	events := make(chan *member)
	members := make([]*member, len(calls))
	for i, c := range calls {
		members[i] = &member{c: c, tx: tx, events: events, reply: make(chan struct{}),
			reads: map[string]struct{}{}, writes: map[string]*write{}}
		go members[i].run()
	}
	for running := len(members); running > 0; {
		var asking []*member
		var keys [][]byte
		seen := map[string]bool{}
		for range running {
			m := <-events
			if m.finished {
				continue
			}
			asking = append(asking, m)
			for _, k := range m.asks {
				if !seen[string(k)] {
					seen[string(k)] = true
					keys = append(keys, k)
				}
			}
		}
		if len(keys) > 0 && tx.err == nil {
			tx.Prefetch(keys...) // a failure is tx.err, which the members see
		}
		for _, m := range asking {
			m.asks = nil
			m.reply <- struct{}{}
		}
		running = len(asking)
	}
	return members
}

// admit splits the members that can commit together: readers (no writes, or a
// failed fn, whose error is their outcome) and writers whose reads and writes meet
// no other admitted writer's writes, in the order of the calls. A member whose
// context has ended leaves with the context's error. The others run alone.
func (s *Store) admit(members []*member) (readers, writers []*member) {
	written := map[string]bool{}
	read := map[string]bool{}
	for _, m := range members {
		switch {
		case m.didPanic || m.goexit || m.left:
		case m.c.ctx.Err() != nil:
			// Its context ended while the group ran: it leaves the group, and its
			// Update returns the context's error, as it would alone.
			m.c.outcome, m.c.err = callDone, fmt.Errorf("pgstore: update: %w", m.c.ctx.Err())
		case m.fnErr != nil:
			m.c.outcome, m.c.err = callDone, m.fnErr
		case len(m.writes) == 0:
			readers = append(readers, m)
		case !m.meets(written, read):
			writers = append(writers, m)
			for k := range m.writes {
				written[k] = true
			}
			for k := range m.reads {
				read[k] = true
			}
		default:
			m.c.fallback = storage.FallbackConflict
		}
	}
	return readers, writers
}

// member is one call's view of a group's transaction, as a storage.Txn: the
// group's reads and its own writes. Its fn runs in a goroutine of its own and
// tells the group (events) when it needs keys read or has returned.
type member struct {
	c      *groupCall
	tx     *txn
	events chan<- *member
	reply  chan struct{}

	asks     [][]byte // keys to read, while waiting for reply
	finished bool     // fn has returned (or panicked)
	left     bool     // fn iterated: the call runs alone
	reads    map[string]struct{}
	writes   map[string]*write

	fnErr    error
	didPanic bool
	panicked any
	goexit   bool // fn called runtime.Goexit (t.FailNow, say)
}

var _ storage.Prefetcher = (*member)(nil)

func (m *member) run() {
	returned := false
	defer func() {
		if p := recover(); p != nil {
			m.didPanic, m.panicked = true, p
		} else if !returned {
			m.goexit = true
		}
		m.finished = true
		m.events <- m
	}()
	m.fnErr = m.c.fn(m)
	returned = true
}

// meets reports whether m reads or writes a key in written, or writes one in read.
func (m *member) meets(written, read map[string]bool) bool {
	for k := range m.reads {
		if written[k] {
			return true
		}
	}
	for k := range m.writes {
		if written[k] || read[k] {
			return true
		}
	}
	return false
}

func (m *member) usable() error {
	switch {
	case m.finished:
		return errTxnDone
	case m.left:
		return errLeftGroup
	}
	if err := m.c.ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: update: %w", err) // it leaves the group (admit)
	}
	return m.tx.err
}

// ask has the group read keys in its next round, and waits for it.
func (m *member) ask(keys [][]byte) error {
	m.asks = keys
	m.events <- m
	<-m.reply
	if err := m.c.ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: update: %w", err)
	}
	return m.tx.err
}

// Get returns the value of key: the member's own write of it, or what the group
// read.
func (m *member) Get(key []byte) ([]byte, error) {
	if err := m.usable(); err != nil {
		return nil, err
	}
	if w, ok := m.writes[string(key)]; ok {
		return w.read()
	}
	m.reads[string(key)] = struct{}{}
	f, ok := m.tx.fetched[string(key)]
	if !ok {
		if err := m.ask([][]byte{bytes.Clone(key)}); err != nil {
			return nil, err
		}
		f = m.tx.fetched[string(key)]
	}
	if !f.found {
		return nil, storage.ErrNotFound
	}
	return bytes.Clone(f.value), nil
}

// Prefetch has the group read, in its next round, the keys that neither the
// member wrote nor the group read already.
func (m *member) Prefetch(keys ...[]byte) error {
	if err := m.usable(); err != nil {
		return err
	}
	var ask [][]byte
	for _, k := range keys {
		if _, ok := m.writes[string(k)]; ok {
			continue
		}
		if _, ok := m.tx.fetched[string(k)]; ok {
			continue
		}
		ask = append(ask, bytes.Clone(k))
	}
	if len(ask) == 0 {
		return nil
	}
	return m.ask(ask)
}

// Set keeps a write of value under key for the group's commit.
func (m *member) Set(key, value []byte, ttl time.Duration) error {
	if err := m.usable(); err != nil {
		return err
	}
	value, micros, err := setArgs(value, ttl)
	if err != nil {
		return err
	}
	m.writes[string(key)] = &write{key: bytes.Clone(key), value: value, micros: micros}
	return nil
}

// Delete keeps a delete of key for the group's commit.
func (m *member) Delete(key []byte) error {
	if err := m.usable(); err != nil {
		return err
	}
	m.writes[string(key)] = &write{key: bytes.Clone(key)}
	return nil
}

// Iterate makes the member leave the group: it runs alone.
func (m *member) Iterate([]byte, func(key, value []byte) (bool, error)) error {
	return m.leave()
}

// IterateKeys makes the member leave the group: it runs alone.
func (m *member) IterateKeys([]byte, func(key []byte) (bool, error)) error {
	return m.leave()
}

func (m *member) leave() error {
	if err := m.usable(); err != nil {
		return err
	}
	m.left = true
	m.c.fallback = storage.FallbackIterate
	return errLeftGroup
}
