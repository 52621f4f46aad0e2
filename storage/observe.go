package storage

import "time"

// Op names a store operation whose duration an Observer receives.
type Op string

// The operations a store measures.
const (
	OpView    Op = "view"     // Store.View
	OpUpdate  Op = "update"   // Store.Update, its retries and its wait for a group included
	OpReadKey Op = "read_key" // KeyReader.ReadKey
)

// Fallback says why an Update that joined a group commit (storage backends'
// grouped commits: several Updates in one transaction) ran in a transaction of
// its own instead.
type Fallback string

// The reasons a member of a group runs alone.
const (
	// FallbackConflict: its keys met another member's writes (pgstore).
	FallbackConflict Fallback = "conflict"
	// FallbackIterate: it read a range of keys, which a group does not share (pgstore).
	FallbackIterate Fallback = "iterate"
	// FallbackFailedGroup: the group's transaction failed (a serialization failure,
	// a conflicting commit, a lost connection), sending every undecided member alone.
	FallbackFailedGroup Fallback = "failed_group"
	// FallbackError: its fn failed on the group's uncommitted state (badgerstore).
	FallbackError Fallback = "fn_error"
	// FallbackPanic: a member's fn panicked, sending every member alone (badgerstore).
	FallbackPanic Fallback = "panic"
)

// Observer receives measurements of a store's work, for metrics. A store given
// none measures nothing. Its methods are called on the hot path, concurrently,
// and must be cheap; they never see a key or a value.
type Observer interface {
	// Operation reports that op took d, whatever its outcome.
	Operation(op Op, d time.Duration)
	// ConflictRetry reports that an Update's transaction is run again because its
	// commit (or a statement) conflicted with a concurrent transaction.
	ConflictRetry()
	// Group reports a group commit of size Updates (one: an Update that found
	// no other to share its transaction with).
	Group(size int)
	// GroupFallback reports that a member of a group runs alone, and why.
	GroupFallback(reason Fallback)
}

// ObserveSince reports to o, when o is not nil, that op took the time since start.
// Backends call it deferred: `defer storage.ObserveSince(o, op, time.Now())`.
func ObserveSince(o Observer, op Op, start time.Time) {
	if o != nil {
		o.Operation(op, time.Since(start))
	}
}
