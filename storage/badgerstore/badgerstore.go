// Package badgerstore implements storage.Store on Badger (github.com/dgraph-io/badger/v4),
// an embedded, transactional, ordered key-value store with serializable snapshot
// isolation. Writes are synced to disk before Update returns.
package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/palmgate/palmgate/storage"
)

const (
	// maxAttempts bounds how many times Update runs fn when its commit keeps
	// conflicting with concurrent transactions.
	maxAttempts = 64
	// optimisticAttempts is how many attempts run concurrently with other
	// Updates. Later attempts run alone (see Store.writeMu), which cannot conflict,
	// so a transaction on a hot key is not starved by luckier ones.
	optimisticAttempts = 8
	// minBackoff and maxBackoff bound the randomized pause between conflicting
	// attempts. The ceiling doubles per attempt from minBackoff to maxBackoff and the
	// pause is drawn uniformly below it, which spreads out goroutines that all read
	// the same hot key so that they stop colliding on every attempt.
	minBackoff = 50 * time.Microsecond
	maxBackoff = 10 * time.Millisecond

	// gcInterval is how often the value log is garbage collected.
	gcInterval = 5 * time.Minute
	// gcDiscardRatio makes GC rewrite a value log file once half of it is garbage.
	gcDiscardRatio = 0.5
)

// retryPause is the pause between conflicting attempts.
var retryPause = storage.Backoff{Min: minBackoff, Max: maxBackoff}

// ErrClosed is returned by Update and View once the store has been closed.
var ErrClosed = errors.New("badgerstore: store is closed")

// ErrTxnTooBig is returned (wrapped, together with badger.ErrTxnTooBig) by Txn.Set,
// Txn.Delete or Update when a single transaction writes more than Badger can commit
// in one batch (about 15% of the memtable size, see Open). Split the work into
// several transactions.
var ErrTxnTooBig = errors.New("badgerstore: transaction too big; split it into smaller ones")

// ErrLocked is wrapped by the error of Open when another process has the directory
// open: Badger locks it for as long as a store is open, so a palmgate that is running
// on it must be stopped first.
var ErrLocked = errors.New("badgerstore: the directory is locked by another process (a palmgate running on it?)")

// errTxnDone is returned when a Txn is used after its fn has returned.
var errTxnDone = errors.New("badgerstore: transaction used after it ended")

// Store is a storage.Store backed by a Badger database in one directory. It is safe
// for concurrent use. Close waits for transactions in flight, so fn passed to Update
// or View must not call Close.
type Store struct {
	db  *badger.DB
	dir string
	log *zap.Logger
	obs storage.Observer // nil: nothing measured

	// mu is held shared by every Update and View for their whole duration and
	// exclusively by Close, so the database is never closed under a transaction.
	mu     sync.RWMutex
	closed bool

	// writeMu is held shared by each optimistic Update attempt (fn and commit) and
	// exclusively by an attempt that already conflicted optimisticAttempts times,
	// which therefore runs with no concurrent writer and cannot conflict again.
	// Optimistic concurrency alone does not guarantee progress: on a hot key each
	// round of conflicting transactions has one winner, and a loser can keep losing.
	writeMu sync.RWMutex

	group   group           // Updates waiting to be committed together
	reads   snapshots       // the read transaction Views share until the next commit (snapshot.go)
	watches storage.Watches // prefixes whose commits are counted (Watch)

	stopGC chan struct{} // closed by Close to stop the GC goroutine
	gcDone chan struct{} // closed by the GC goroutine when it has returned
}

var (
	_ storage.Store   = (*Store)(nil)
	_ storage.Watcher = (*Store)(nil)
)

// Open opens (creating if needed) the Badger database in dir. Every committed write
// is synced to disk before Update returns. Badger's own log lines go to logger
// (nil means no logging) under the name "badger", with its info and debug chatter at
// debug level. A background goroutine garbage collects the value log every few
// minutes until Close.
func Open(dir string, logger *zap.Logger) (*Store, error) {
	return OpenWith(dir, Options{Logger: logger})
}

// Options configures OpenWith.
type Options struct {
	// Logger receives Badger's and the store's log lines (see Open). Nil means no
	// logging.
	Logger *zap.Logger
	// Observer receives the durations of Update and View, conflict retries and
	// group commits (group.go). Nil measures nothing.
	Observer storage.Observer
}

// OpenWith is Open with options.
func OpenWith(dir string, o Options) (*Store, error) {
	logger := o.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	db, err := badger.Open(options(dir, logger))
	if err != nil {
		// Badger's lock error keeps only the text of the flock error it wraps.
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("opening badger at %s: %w: %w", dir, ErrLocked, err)
		}
		return nil, fmt.Errorf("opening badger at %s: %w", dir, err)
	}
	if err := refuseUnfinishedImport(db); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("opening badger at %s: %w", dir, err)
	}
	s := &Store{
		db:     db,
		dir:    dir,
		log:    logger,
		obs:    o.Observer,
		stopGC: make(chan struct{}),
		gcDone: make(chan struct{}),
	}
	go s.runGC(gcInterval)
	return s, nil
}

// options returns Badger options sized for a small (2-core, a few hundred MB of RAM)
// machine holding small records; the defaults target large servers.
func options(dir string, logger *zap.Logger) badger.Options {
	opts := badger.DefaultOptions(dir).
		// An answered write must survive a crash: sync every commit. Badger writes
		// concurrent commits together but syncs its log once for each of them, so
		// Update groups concurrent Updates into one commit (group.go).
		WithSyncWrites(true).
		WithLogger(newBadgerLogger(logger)).
		// 16 MiB memtables instead of 64 MiB, and at most 2 of them (one being
		// written, one being flushed) instead of 5: about 40 MiB of arenas at most
		// instead of about 400 MiB. This also caps one transaction at 15% of a
		// memtable, about 2.4 MiB, far above what a registration writes.
		WithMemTableSize(16 << 20).
		WithNumMemtables(2).
		// 32 MiB block cache instead of 256 MiB; the working set of small records
		// is small and the OS page cache sits behind it anyway.
		WithBlockCacheSize(32 << 20).
		// Bound the memory used for table indexes and bloom filters (0, the
		// default, keeps all of them in memory however large the database grows).
		WithIndexCacheSize(16 << 20).
		// 2 compactors (the minimum besides none) instead of 4, one per core, and
		// 2 goroutines instead of 8 for Badger's stream framework.
		WithNumCompactors(2).
		WithNumGoroutines(2).
		// 64 MiB value log files instead of 1 GiB. Values under the (default 1 MiB)
		// value threshold live in the LSM tree, so the value log stays small, and
		// smaller files are rewritten by GC sooner and in smaller steps.
		WithValueLogFileSize(64 << 20)
	// Tables of 2 MiB (BaseTableSize) on every level, instead of doubling per
	// level below the base one. Badger builds each new table in memory at twice
	// its size, several at a time per compaction: with growing tables, the
	// compactions of a store of a few hundred MB took RSS from ~400 MB to ~900 MB
	// for a few seconds (a heap profile shows z.Calloc under compactBuildTables).
	opts.TableSizeMultiplier = 1
	return opts
}

// Update runs fn in a read-write transaction and commits it, synced to disk, when fn
// returns nil. Concurrent Updates are committed together (see group.go): their fns
// run one after the other in one transaction, each seeing the writes of those before
// it, and one synced commit serves them all. A fn that fails there, or a group that
// conflicts, runs again on its own. When its commit conflicts with a concurrent
// transaction, fn runs again from scratch after a short randomized pause. After 8
// conflicting attempts, fn runs while no other Update does, so it cannot conflict
// again; should it still conflict, Update gives up after 64 attempts in all with an
// error wrapping storage.ErrConflict. ctx is checked before every attempt and during
// the pauses. fn should be short (it holds up the Updates grouped after it) and must
// not call Update, View or Close on the same Store.
func (s *Store) Update(ctx context.Context, fn func(storage.Txn) error) error {
	if s.obs != nil {
		defer storage.ObserveSince(s.obs, storage.OpUpdate, time.Now())
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("badgerstore: update: %w", err)
	}
	c := s.commitGrouped(ctx, fn)
	if !c.alone {
		return c.err
	}
	first := 1
	if c.ran {
		first = 2 // the grouped run was the first attempt
		if c.conflicted && s.obs != nil {
			s.obs.ConflictRetry()
		}
	}
	return s.updateAlone(ctx, fn, first)
}

// updateAlone runs fn in transactions of its own, from attempt first, until one
// commits, fn fails or the attempts run out (see Update).
func (s *Store) updateAlone(ctx context.Context, fn func(storage.Txn) error, first int) error {
	for attempt := first; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("badgerstore: update: %w", err)
		}
		exclusive := attempt > optimisticAttempts
		conflict, err := s.attempt(fn, exclusive)
		if !conflict {
			return err
		}
		if attempt >= maxAttempts {
			return fmt.Errorf("badgerstore: update still conflicting after %d attempts: %w", maxAttempts, storage.ErrConflict)
		}
		if s.obs != nil {
			s.obs.ConflictRetry()
		}
		if exclusive {
			continue // no one to make room for
		}
		if err := storage.Sleep(ctx, retryPause.Before(attempt)); err != nil {
			return fmt.Errorf("badgerstore: update: %w", err)
		}
	}
}

// attempt runs fn once in a new read-write transaction and commits it, holding
// writeMu shared or, when exclusive, exclusively. conflict reports that the commit
// failed with badger.ErrConflict and fn should be retried.
func (s *Store) attempt(fn func(storage.Txn) error, exclusive bool) (conflict bool, err error) {
	if exclusive {
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
	} else {
		s.writeMu.RLock()
		defer s.writeMu.RUnlock()
	}
	btx := s.db.NewTransaction(true)
	defer btx.Discard()
	var touched storage.Touched
	tx := &txn{btx: btx, watches: &s.watches, touched: &touched}
	err = fn(tx)
	tx.done = true
	if err != nil {
		return false, err
	}
	err = btx.Commit()
	s.reads.retire()
	if err != nil {
		if errors.Is(err, badger.ErrConflict) {
			return true, err
		}
		return false, mapErr("commit", err)
	}
	touched.Committed() // after retire: a View begun from now on reads a snapshot with these writes
	return false, nil
}

// View runs fn in a read-only transaction over a consistent snapshot, which it
// shares with the other Views since the last commit (snapshot.go). Set and Delete
// inside it return an error. ctx is checked before fn runs.
func (s *Store) View(ctx context.Context, fn func(storage.Txn) error) error {
	if s.obs != nil {
		defer storage.ObserveSince(s.obs, storage.OpView, time.Now())
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("badgerstore: view: %w", err)
	}
	sn := s.reads.acquire(s.db)
	defer s.reads.release(sn)
	tx := &txn{btx: sn.btx}
	defer func() { tx.done = true }()
	return fn(tx)
}

// Watch returns the counter of the commits that write under prefix: every write
// passes through this Store (snapshot.go says why), so it can count them.
func (s *Store) Watch(prefix []byte) *storage.Changes { return s.watches.Watch(prefix) }

// Close stops value log GC and closes the database, after waiting for transactions
// in flight. Calling it again does nothing and returns nil.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	close(s.stopGC)
	<-s.gcDone
	s.reads.retire() // no View runs: discarded now
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("closing badger at %s: %w", s.dir, err)
	}
	return nil
}

// runGC garbage collects the value log every interval until stopGC is closed. Each
// round rewrites files until Badger finds none worth rewriting.
func (s *Store) runGC(interval time.Duration) {
	defer close(s.gcDone)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-s.stopGC:
			return
		case <-ticker.C:
		}
		for rewrites := 0; ; rewrites++ {
			select {
			case <-s.stopGC:
				return
			default:
			}
			err := s.db.RunValueLogGC(gcDiscardRatio)
			if err == nil {
				continue
			}
			if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrRejected) {
				s.log.Warn("badger value log GC failed", zap.String("dir", s.dir), zap.Error(err))
			}
			s.log.Debug("badger value log GC done", zap.String("dir", s.dir), zap.Int("rewrites", rewrites))
			break
		}
	}
}

// txn adapts a Badger transaction to storage.Txn. It is not safe for concurrent use.
type txn struct {
	btx     *badger.Txn
	done    bool             // fn has returned; btx is (about to be) discarded
	watches *storage.Watches // nil in a View
	touched *storage.Touched // the watched prefixes its writes touched, counted at commit
}

// Get returns a copy of the value of key, or storage.ErrNotFound.
func (t *txn) Get(key []byte) ([]byte, error) {
	if t.done {
		return nil, errTxnDone
	}
	item, err := t.btx.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, storage.ErrNotFound
	}
	if err != nil {
		return nil, mapErr("get", err)
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return nil, mapErr("get: reading value", err)
	}
	return v, nil
}

// Set stores copies of key and value, so the caller may reuse both at once. A ttl
// above zero is rounded up to Badger's one-second expiry resolution: the record
// lives at least ttl and less than ttl plus one second.
func (t *txn) Set(key, value []byte, ttl time.Duration) error {
	if t.done {
		return errTxnDone
	}
	if ttl < 0 {
		return fmt.Errorf("badgerstore: set: negative ttl %v", ttl)
	}
	e := badger.NewEntry(bytes.Clone(key), bytes.Clone(value))
	if ttl > 0 {
		// Not e.WithTTL(ttl): it rounds the expiry down to the second, so a 1s ttl
		// could expire almost at once.
		e.ExpiresAt = expiresAt(time.Now(), ttl)
	}
	if err := t.btx.SetEntry(e); err != nil {
		return mapErr("set", err)
	}
	if t.watches != nil {
		t.watches.Note(t.touched, key)
	}
	return nil
}

// expiresAt returns the Unix second from which a record written at now with ttl is
// expired (Badger treats a record as expired once the current Unix second reaches
// its ExpiresAt): now+ttl rounded up to a whole second.
func expiresAt(now time.Time, ttl time.Duration) uint64 {
	deadline := now.Add(ttl)
	secs := deadline.Unix()
	if deadline.Nanosecond() > 0 {
		secs++
	}
	return uint64(secs)
}

// Delete removes key; deleting a missing key is not an error.
func (t *txn) Delete(key []byte) error {
	if t.done {
		return errTxnDone
	}
	if err := t.btx.Delete(bytes.Clone(key)); err != nil {
		return mapErr("delete", err)
	}
	if t.watches != nil {
		t.watches.Note(t.touched, key)
	}
	return nil
}

// Iterate calls fn with copies of each live key starting with prefix and its value,
// in ascending byte order, including the transaction's own uncommitted writes. It
// stops when fn returns false or an error, which it returns unwrapped.
func (t *txn) Iterate(prefix []byte, fn func(key, value []byte) (bool, error)) error {
	return t.iterate(prefix, func(item *badger.Item) (bool, error) {
		value, err := item.ValueCopy(nil)
		if err != nil {
			return false, mapErr("iterate: reading value", err)
		}
		return fn(item.KeyCopy(nil), value)
	})
}

// IterateKeys is Iterate without copying the values out of the LSM tree.
func (t *txn) IterateKeys(prefix []byte, fn func(key []byte) (bool, error)) error {
	return t.iterate(prefix, func(item *badger.Item) (bool, error) {
		return fn(item.KeyCopy(nil))
	})
}

// iterate calls fn with each live item whose key starts with prefix, in order,
// until fn returns false or an error.
func (t *txn) iterate(prefix []byte, fn func(*badger.Item) (bool, error)) error {
	if t.done {
		return errTxnDone
	}
	opts := badger.DefaultIteratorOptions
	// No value prefetching: Badger prefetches every value in a goroutine of its
	// own (Iterator.fill), which for our small values, stored inline in the LSM
	// tree, costs far more than reading each in place with ValueCopy.
	opts.PrefetchValues = false
	opts.Prefix = prefix
	it := t.btx.NewIterator(opts)
	defer it.Close()
	for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
		more, err := fn(it.Item())
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// mapErr wraps a Badger error from op with context, adding ErrTxnTooBig when the
// transaction outgrew one batch.
func mapErr(op string, err error) error {
	switch {
	case errors.Is(err, badger.ErrTxnTooBig):
		return fmt.Errorf("%w: %s: %w", ErrTxnTooBig, op, err)
	case errors.Is(err, badger.ErrReadOnlyTxn):
		return fmt.Errorf("badgerstore: %s in a read-only (View) transaction: %w", op, err)
	default:
		return fmt.Errorf("badgerstore: %s: %w", op, err)
	}
}

// badgerLogger adapts zap to badger.Logger. Badger is chatty at info level (every
// open, flush and compaction), so Infof and Debugf both log at debug level.
type badgerLogger struct{ l *zap.Logger }

func newBadgerLogger(l *zap.Logger) badgerLogger {
	// Skip logf and the badgerLogger method so that the caller is Badger's code.
	return badgerLogger{l.Named("badger").WithOptions(zap.AddCallerSkip(2))}
}

// Errorf logs at error level.
func (b badgerLogger) Errorf(format string, args ...any) { b.logf(zapcore.ErrorLevel, format, args) }

// Warningf logs at warn level.
func (b badgerLogger) Warningf(format string, args ...any) { b.logf(zapcore.WarnLevel, format, args) }

// Infof logs at debug level.
func (b badgerLogger) Infof(format string, args ...any) { b.logf(zapcore.DebugLevel, format, args) }

// Debugf logs at debug level.
func (b badgerLogger) Debugf(format string, args ...any) { b.logf(zapcore.DebugLevel, format, args) }

// logf formats only when lvl is enabled, trimming the newline Badger often appends.
func (b badgerLogger) logf(lvl zapcore.Level, format string, args []any) {
	if !b.l.Core().Enabled(lvl) {
		return
	}
	b.l.Log(lvl, strings.TrimRight(fmt.Sprintf(format, args...), "\n"))
}
