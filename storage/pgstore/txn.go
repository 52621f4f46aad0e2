package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/palmgate/palmgate/storage"
)

// SQL on palmgate_kv. A record is live while expires_at is NULL or later than now(),
// the start of the current transaction on the database's clock.
const (
	live      = `(expires_at IS NULL OR expires_at > now())`
	sqlGet    = `SELECT value FROM palmgate_kv WHERE key = $1 AND ` + live
	sqlDelete = `DELETE FROM palmgate_kv WHERE key = $1`
	// $3 is the ttl in microseconds; 0 means no expiry.
	sqlSet = `INSERT INTO palmgate_kv (key, value, expires_at)
VALUES ($1, $2, CASE WHEN $3::INT8 > 0 THEN now() + $3::INT8 * INTERVAL '1 microsecond' END)
ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at`
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

// txn adapts a pgx transaction to storage.Txn. It is not safe for concurrent use.
//
// Writes are deferred: Set and Delete queue their statement, and the queue is sent
// in one round trip with the transaction's next read (so that the read sees them)
// or, when fn has returned nil, before the commit (Store.attempt). A queued write
// that fails fails the transaction there, as the statement would have.
type txn struct {
	s        *Store
	ctx      context.Context
	tx       pgx.Tx
	readOnly bool
	done     bool    // fn has returned
	err      error   // the first statement that failed; the transaction is aborted
	pending  []write // queued writes, not yet sent
}

// write is a queued Set or Delete.
type write struct {
	op   string // "set" or "delete", for errors
	sql  string
	args []any
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

// Get returns the value of key, or storage.ErrNotFound.
func (t *txn) Get(key []byte) ([]byte, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	var v []byte
	ctx, cancel := t.s.bound(t.ctx)
	defer cancel()
	var err error
	if len(t.pending) == 0 {
		err = t.tx.QueryRow(ctx, sqlGet, key).Scan(&v)
	} else {
		br, perr := t.sendPending(ctx, sqlGet, key)
		if perr != nil {
			return nil, perr
		}
		err = br.QueryRow().Scan(&v)
		if cerr := br.Close(); err == nil || errors.Is(err, pgx.ErrNoRows) {
			if cerr != nil {
				err = cerr
			}
		}
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, storage.ErrNotFound
	}
	if err != nil {
		return nil, t.fail("get", err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

// Set stores value under key. A ttl above zero makes the record expire ttl after
// the transaction started, by the database's clock, to the microsecond.
func (t *txn) Set(key, value []byte, ttl time.Duration) error {
	if err := t.usable(); err != nil {
		return err
	}
	if t.readOnly {
		return errReadOnly
	}
	if ttl < 0 {
		return fmt.Errorf("pgstore: set: negative ttl %v", ttl)
	}
	micros := ttl.Microseconds()
	if ttl > 0 && micros == 0 {
		micros = 1
	}
	value = bytes.Clone(value) // queued: the caller may reuse its slices
	if value == nil {
		value = []byte{} // nil would be NULL
	}
	t.pending = append(t.pending, write{"set", sqlSet, []any{bytes.Clone(key), value, micros}})
	return nil
}

// Delete removes key; deleting a missing key is not an error.
func (t *txn) Delete(key []byte) error {
	if err := t.usable(); err != nil {
		return err
	}
	if t.readOnly {
		return errReadOnly
	}
	t.pending = append(t.pending, write{"delete", sqlDelete, []any{bytes.Clone(key)}})
	return nil
}

// sendPending sends the queued writes and then the statement sql, in one round
// trip, and returns the results positioned at sql's: the caller reads them and
// closes them. A write that fails fails the transaction.
func (t *txn) sendPending(ctx context.Context, sql string, args ...any) (pgx.BatchResults, error) {
	pending := t.pending
	t.pending = nil
	b := &pgx.Batch{}
	for _, w := range pending {
		b.Queue(w.sql, w.args...)
	}
	b.Queue(sql, args...)
	br := t.tx.SendBatch(ctx, b)
	for _, w := range pending {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, t.fail(w.op, err)
		}
	}
	return br, nil
}

// flush sends the queued writes, in one round trip, once fn has returned nil and
// before the commit. A write that fails fails the transaction.
func (t *txn) flush() error {
	if t.err != nil || len(t.pending) == 0 {
		return t.err
	}
	pending := t.pending
	t.pending = nil
	ctx, cancel := t.s.bound(t.ctx)
	defer cancel()
	if len(pending) == 1 {
		if _, err := t.tx.Exec(ctx, pending[0].sql, pending[0].args...); err != nil {
			return t.fail(pending[0].op, err)
		}
		return nil
	}
	b := &pgx.Batch{}
	for _, w := range pending {
		b.Queue(w.sql, w.args...)
	}
	br := t.tx.SendBatch(ctx, b)
	for _, w := range pending {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return t.fail(w.op, err)
		}
	}
	if err := br.Close(); err != nil {
		return t.fail("write", err)
	}
	return nil
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
// end is nil) and above after (when not nil), in order.
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
	ctx, cancel := t.s.bound(t.ctx)
	defer cancel()
	var rows pgx.Rows
	var br pgx.BatchResults // when the queued writes went first
	var err error
	if len(t.pending) == 0 {
		rows, err = t.tx.Query(ctx, q, args...)
	} else {
		if br, err = t.sendPending(ctx, q, args...); err != nil {
			return nil, err
		}
		rows, err = br.Query()
	}
	if err != nil {
		if br != nil {
			br.Close()
		}
		return nil, t.fail("iterate", err)
	}
	page := make([]row, 0, min(limit, 64))
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.k, &r.v); err != nil {
			rows.Close()
			if br != nil {
				br.Close()
			}
			return nil, t.fail("iterate", err)
		}
		if values && r.v == nil {
			r.v = []byte{}
		}
		page = append(page, r)
	}
	if err := rows.Err(); err != nil {
		if br != nil {
			br.Close()
		}
		return nil, t.fail("iterate", err)
	}
	if br != nil {
		if err := br.Close(); err != nil {
			return nil, t.fail("iterate", err)
		}
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
