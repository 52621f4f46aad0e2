package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/palmgate/palmgate/storage"
)

// SQL on palmgate_kv. A record is live while expires_at is NULL or later than now(),
// the start of the current transaction on the database's clock.
const (
	live   = `(expires_at IS NULL OR expires_at > now())`
	sqlGet = `SELECT value FROM palmgate_kv WHERE key = $1 AND ` + live
	// The arrays are joined, not matched with key = ANY($1), which PostgreSQL plans
	// on the primary key's B-tree: its serializable reads would then lock the
	// B-tree pages concurrent inserts touch, not the keys' hash buckets (see
	// migration 3).
	sqlGetMany = `SELECT key, value FROM unnest($1::BYTEA[]) AS w(k) JOIN palmgate_kv ON key = k WHERE ` + live
	sqlDelete  = `DELETE FROM palmgate_kv USING unnest($1::BYTEA[]) AS w(k) WHERE key = k`
	// $3 holds the ttls in microseconds; 0 means no expiry.
	sqlSet = `INSERT INTO palmgate_kv (key, value, expires_at)
SELECT k, v, CASE WHEN t > 0 THEN now() + t * INTERVAL '1 microsecond' END
FROM unnest($1::BYTEA[], $2::BYTEA[], $3::INT8[]) AS w(k, v, t)
ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at`
	sqlCommit   = `COMMIT`
	sqlRollback = `ROLLBACK`
)

const (
	// firstPage and maxPage bound how many rows one query of Iterate fetches: the
	// first page is small, for callers that stop early, and each next one twice as
	// large up to maxPage, which bounds the memory an iteration holds.
	firstPage = 16
	maxPage   = 1024
)

// errTxnDone is returned when a Txn is used after its fn has returned.
var errTxnDone = errors.New("pgstore: transaction used after it ended")

// errReadOnly is returned by Set and Delete inside View.
var errReadOnly = errors.New("pgstore: write in a read-only (View) transaction")

// txn is one transaction on a pooled connection, as a storage.Txn. It is not safe
// for concurrent use.
//
// It saves round trips, which cost both processes more than the statements do:
//   - the BEGIN goes with the transaction's first statement;
//   - a Get of a key the transaction wrote, or that Prefetch read, is answered
//     without asking the database;
//   - writes are kept (the last one of each key) and sent as one INSERT and one
//     DELETE with the COMMIT, or earlier with an Iterate over their prefix, which
//     must see them. A write that fails fails the transaction there.
//
// Deferring a write within a SERIALIZABLE transaction changes neither what its
// reads see (no read is of a key it wrote but did not send) nor its serializability
// (PostgreSQL checks a transaction's reads and writes together, whenever each
// happens). Writes go in key order, so that two transactions writing the same keys
// lock them in the same order.
type txn struct {
	s        *Store
	ctx      context.Context
	conn     *pgxpool.Conn
	begin    string // the BEGIN statement
	begun    bool   // the BEGIN has been answered: the server has a transaction open
	readOnly bool
	done     bool  // fn has returned
	err      error // the first statement that failed; the transaction is aborted

	writes  map[string]*write  // the last write of each key, sent or not
	fetched map[string]fetched // keys read by Prefetch
}

var _ storage.Prefetcher = (*txn)(nil)

// write is the last Set or Delete of a key.
type write struct {
	key    []byte
	value  []byte // nil for a Delete
	micros int64  // the ttl of a Set
	sent   bool
}

// read returns what a Get of the written key returns.
func (w *write) read() ([]byte, error) {
	if w.value == nil {
		return nil, storage.ErrNotFound
	}
	return bytes.Clone(w.value), nil
}

// fetched is what Prefetch read of a key.
type fetched struct {
	value []byte
	found bool
}

// fail records err, from a statement of op, as the transaction's failure and returns it.
func (t *txn) fail(op string, err error) error {
	t.err = t.s.wrap(t.ctx, op, err)
	return t.err
}

// usable returns why the transaction cannot run another statement, or nil.
func (t *txn) usable() error {
	if t.done {
		return errTxnDone
	}
	return t.err
}

// roundTrip sends, in one round trip, the BEGIN when it has not been sent, the
// unsent writes when flush is true, and the statements queue adds; it returns the
// results positioned at queue's first, which the caller reads and then ends with
// end. A failure of the BEGIN or of a write fails the transaction.
//
// The transaction's first round trip is run again on another connection when the
// connection is lost before the BEGIN was answered, unless it asked to commit: the
// server had nothing of the transaction yet, and fn nothing of the server's.
func (t *txn) roundTrip(flush, commits bool, queue func(*pgx.Batch)) (pgx.BatchResults, func(), error) {
	for retry := 0; ; retry++ {
		b := &pgx.Batch{}
		begin := !t.begun
		if begin {
			b.Queue(t.begin)
		}
		var sets, dels int
		if flush {
			sets, dels = t.queueWrites(b)
		}
		queue(b)
		ctx, cancel := t.s.bound(t.ctx)
		t.s.roundTrips.Add(1)
		br := t.conn.SendBatch(ctx, b)
		end := func() { br.Close(); cancel() }
		op := "begin"
		err := func() error {
			if begin {
				if _, err := br.Exec(); err != nil {
					return err
				}
				t.begun = true
			}
			op = "write"
			for range sets + dels {
				if _, err := br.Exec(); err != nil {
					return err
				}
			}
			return nil
		}()
		if err == nil {
			if flush {
				t.markSent()
			}
			return br, end, nil
		}
		end()
		err = t.s.wrap(t.ctx, op, err)
		if !begin || t.begun || commits || retry >= maxUnavailableRetries || retryOf(err) != retryUnavailable {
			t.err = err
			return nil, nil, err
		}
		if err := t.reconnect(); err != nil {
			t.err = err
			return nil, nil, err
		}
	}
}

// reconnect replaces the transaction's connection, which was lost before its
// BEGIN was answered, by another one from the pool.
func (t *txn) reconnect() error {
	t.conn.Release() // a closed connection is destroyed, not pooled
	t.conn = nil
	t.s.retries.Add(1)
	if err := storage.Sleep(t.ctx, retryPause.Before(1)); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	conn, err := t.s.acquire(t.ctx)
	if err != nil {
		return err
	}
	t.conn = conn
	return nil
}

// queueWrites queues the unsent writes, in key order, as at most one INSERT and one
// DELETE, and returns how many of each it queued.
func (t *txn) queueWrites(b *pgx.Batch) (sets, dels int) {
	var setKeys, values, delKeys [][]byte
	var micros []int64
	for _, w := range t.sorted() {
		if w.sent {
			continue
		}
		if w.value == nil {
			delKeys = append(delKeys, w.key)
			continue
		}
		setKeys, values, micros = append(setKeys, w.key), append(values, w.value), append(micros, w.micros)
	}
	if len(delKeys) > 0 {
		b.Queue(sqlDelete, delKeys)
		dels = 1
	}
	if len(setKeys) > 0 {
		b.Queue(sqlSet, setKeys, values, micros)
		sets = 1
	}
	return sets, dels
}

// sorted returns the transaction's writes in key order.
func (t *txn) sorted() []*write {
	ws := make([]*write, 0, len(t.writes))
	for _, w := range t.writes {
		ws = append(ws, w)
	}
	slices.SortFunc(ws, func(a, b *write) int { return bytes.Compare(a.key, b.key) })
	return ws
}

// markSent records that every write has been sent.
func (t *txn) markSent() {
	for _, w := range t.writes {
		w.sent = true
	}
}

// Get returns the value of key, or storage.ErrNotFound.
func (t *txn) Get(key []byte) ([]byte, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	if w, ok := t.writes[string(key)]; ok {
		return w.read()
	}
	if f, ok := t.fetched[string(key)]; ok {
		if !f.found {
			return nil, storage.ErrNotFound
		}
		return bytes.Clone(f.value), nil
	}
	br, end, err := t.roundTrip(false, false, func(b *pgx.Batch) { b.Queue(sqlGet, key) })
	if err != nil {
		return nil, err
	}
	defer end()
	var v []byte
	switch err := br.QueryRow().Scan(&v); {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, storage.ErrNotFound
	case err != nil:
		return nil, t.fail("get", err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

// Prefetch reads keys in one round trip (with the BEGIN, when it is the first) and
// keeps what it read for the transaction's Gets of them. Keys the transaction wrote
// or already fetched are not read again.
func (t *txn) Prefetch(keys ...[]byte) error {
	if err := t.usable(); err != nil {
		return err
	}
	var ask [][]byte
	for _, k := range keys {
		if _, ok := t.writes[string(k)]; ok {
			continue
		}
		if _, ok := t.fetched[string(k)]; ok {
			continue
		}
		if t.fetched == nil {
			t.fetched = make(map[string]fetched, len(keys))
		}
		t.fetched[string(k)] = fetched{} // absent unless read below
		ask = append(ask, k)
	}
	if len(ask) == 0 {
		return nil
	}
	br, end, err := t.roundTrip(false, false, func(b *pgx.Batch) { b.Queue(sqlGetMany, ask) })
	if err != nil {
		return err
	}
	defer end()
	rows, err := br.Query()
	if err != nil {
		return t.fail("prefetch", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k, v []byte
		if err := rows.Scan(&k, &v); err != nil {
			return t.fail("prefetch", err)
		}
		if v == nil {
			v = []byte{}
		}
		t.fetched[string(k)] = fetched{value: v, found: true}
	}
	if err := rows.Err(); err != nil {
		return t.fail("prefetch", err)
	}
	return nil
}

// Set stores value under key. A ttl above zero makes the record expire ttl after
// the transaction started, by the database's clock, to the microsecond.
func (t *txn) Set(key, value []byte, ttl time.Duration) error {
	value, micros, err := setArgs(value, ttl)
	if err != nil {
		return err
	}
	return t.keep(key, value, micros)
}

// setArgs returns the value and ttl of a Set as a write keeps them: a copy of
// value (the caller may reuse its slices), never nil (which would be NULL), and
// the ttl in microseconds, at least 1 when above zero.
func setArgs(value []byte, ttl time.Duration) ([]byte, int64, error) {
	if ttl < 0 {
		return nil, 0, fmt.Errorf("pgstore: set: negative ttl %v", ttl)
	}
	micros := ttl.Microseconds()
	if ttl > 0 && micros == 0 {
		micros = 1
	}
	value = bytes.Clone(value)
	if value == nil {
		value = []byte{}
	}
	return value, micros, nil
}

// Delete removes key; deleting a missing key is not an error.
func (t *txn) Delete(key []byte) error {
	return t.keep(key, nil, 0)
}

// keep records a write of key, to be sent later: value nil is a Delete.
func (t *txn) keep(key, value []byte, micros int64) error {
	if err := t.usable(); err != nil {
		return err
	}
	if t.readOnly {
		return errReadOnly
	}
	if t.writes == nil {
		t.writes = make(map[string]*write)
	}
	w, ok := t.writes[string(key)]
	if !ok {
		w = &write{key: bytes.Clone(key)}
		t.writes[string(key)] = w
	}
	w.value, w.micros, w.sent = value, micros, false
	return nil
}

// unsentUnder reports whether an unsent write has a key starting with prefix
// (any unsent write, for the empty prefix).
func (t *txn) unsentUnder(prefix []byte) bool {
	for _, w := range t.writes {
		if !w.sent && bytes.HasPrefix(w.key, prefix) {
			return true
		}
	}
	return false
}

// commit sends the unsent writes and the COMMIT in one round trip. A transaction
// that has neither read nor written has nothing to commit.
func (t *txn) commit() error {
	if !t.begun && !t.unsentUnder(nil) {
		return nil
	}
	br, end, err := t.roundTrip(true, true, func(b *pgx.Batch) { b.Queue(sqlCommit) })
	if err != nil {
		return err
	}
	defer end()
	tag, err := br.Exec()
	if err != nil {
		return t.fail("commit", err)
	}
	t.begun = false // ended
	if tag.String() != "COMMIT" {
		// A COMMIT of a transaction that failed earlier ends it with ROLLBACK and
		// no error; every failure is caught before, but this one must not pass.
		t.err = fmt.Errorf("pgstore: commit: the server answered %q: nothing was committed", tag.String())
		return t.err
	}
	return nil
}

// end releases the connection, rolling back what is still open on it; a
// connection left in a transaction (the ROLLBACK failed) is closed by the pool.
func (t *txn) end() {
	if t.conn == nil {
		return
	}
	if t.begun {
		ctx, cancel := t.s.bound(context.Background())
		t.s.roundTrips.Add(1)
		t.conn.Exec(ctx, sqlRollback)
		cancel()
	}
	t.conn.Release()
	t.conn = nil
}

// Iterate calls fn with each live key starting with prefix and its value, in
// ascending byte order, including the transaction's own writes. It reads in pages
// (see firstPage), so fn may itself use the transaction.
func (t *txn) Iterate(prefix []byte, fn func(key, value []byte) (bool, error)) error {
	return t.iterate(prefix, true, fn)
}

// IterateKeys is Iterate without reading the values.
func (t *txn) IterateKeys(prefix []byte, fn func(key []byte) (bool, error)) error {
	return t.iterate(prefix, false, func(k, _ []byte) (bool, error) { return fn(k) })
}

// row is one record of a page.
type row struct{ k, v []byte }

func (t *txn) iterate(prefix []byte, values bool, fn func(key, value []byte) (bool, error)) error {
	if err := t.usable(); err != nil {
		return err
	}
	end := prefixEnd(prefix)
	var after []byte // the last key seen; nil before the first page
	for limit := firstPage; ; limit = min(2*limit, maxPage) {
		page, err := t.page(prefix, end, after, values, limit)
		if err != nil {
			return err
		}
		for _, r := range page {
			if more, err := fn(r.k, r.v); err != nil || !more {
				return err
			}
		}
		if len(page) < limit {
			return nil
		}
		after = page[len(page)-1].k
	}
}

// page reads up to limit live records with keys in [prefix, end) (no upper bound when
// end is nil) and above after (when not nil), in order. The unsent writes go first
// when one of them is in the range.
func (t *txn) page(prefix, end, after []byte, values bool, limit int) ([]row, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	cols := "key, NULL::BYTEA"
	if values {
		cols = "key, value"
	}
	q := "SELECT " + cols + " FROM palmgate_kv WHERE " + live
	args := []any{}
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	if after != nil {
		q += " AND key > " + arg(after)
	} else if len(prefix) > 0 {
		q += " AND key >= " + arg(prefix)
	}
	if end != nil {
		q += " AND key < " + arg(end)
	}
	q += " ORDER BY key LIMIT " + arg(limit)
	br, done, err := t.roundTrip(t.unsentUnder(prefix), false, func(b *pgx.Batch) { b.Queue(q, args...) })
	if err != nil {
		return nil, err
	}
	defer done()
	rows, err := br.Query()
	if err != nil {
		return nil, t.fail("iterate", err)
	}
	defer rows.Close()
	page := make([]row, 0, min(limit, 64))
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.k, &r.v); err != nil {
			return nil, t.fail("iterate", err)
		}
		if values && r.v == nil {
			r.v = []byte{}
		}
		page = append(page, r)
	}
	if err := rows.Err(); err != nil {
		return nil, t.fail("iterate", err)
	}
	return page, nil
}

// prefixEnd returns the smallest key above every key starting with prefix, or nil
// when there is none (prefix is empty or all 0xFF bytes).
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
