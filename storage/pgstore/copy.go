package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/palmgate/palmgate/storage"
)

var (
	_ storage.Exporter = (*Store)(nil)
	_ storage.Importer = (*Store)(nil)
)

// importBatch is how many records one COPY of Import sends: a batch is one statement,
// well within the statement timeout, and bounds the memory Import holds.
const importBatch = 1000

// sqlExportPage reads a page of live records with their expiry; $1 is the last key of
// the previous page (NULL for the first), $2 the page size.
const sqlExportPage = `SELECT key, value, expires_at FROM palmgate_kv
WHERE ` + live + ` AND ($1::BYTEA IS NULL OR key > $1) ORDER BY key LIMIT $2`

// Import copies every record src exports into this store, in one SERIALIZABLE
// transaction: it first checks that palmgate_kv holds no row at all (live or
// expired; otherwise the error wraps storage.ErrNotEmpty), then sends the records
// with COPY in batches of 1000, each with expires_at set to the record's own
// ExpiresAt (the absolute instant, not a ttl from now). Records already expired by
// this machine's clock when read are skipped. Nothing is written unless every record
// was. It returns how many records it wrote.
func (s *Store) Import(ctx context.Context, src storage.Exporter) (int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, ErrClosed
	}
	bctx, cancel := s.bound(ctx)
	ptx, err := s.pool.BeginTx(bctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	cancel()
	if err != nil {
		return 0, s.wrap(ctx, "import: begin", err)
	}
	defer s.rollback(ptx)
	var nonEmpty bool
	qctx, cancel := s.bound(ctx)
	err = ptx.QueryRow(qctx, `SELECT EXISTS (SELECT 1 FROM palmgate_kv)`).Scan(&nonEmpty)
	cancel()
	if err != nil {
		return 0, s.wrap(ctx, "import: checking the target is empty", err)
	}
	if nonEmpty {
		return 0, fmt.Errorf("pgstore: import into %s: %w: palmgate_kv has records", s.host, storage.ErrNotEmpty)
	}
	n := 0
	batch := make([][]any, 0, importBatch)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		fctx, cancel := s.bound(ctx)
		defer cancel()
		if _, err := ptx.CopyFrom(fctx, pgx.Identifier{"palmgate_kv"}, []string{"key", "value", "expires_at"},
			pgx.CopyFromRows(batch)); err != nil {
			return s.wrap(ctx, "import: copy", err)
		}
		n += len(batch)
		batch = batch[:0]
		return nil
	}
	err = src.Export(ctx, func(r storage.Record) error {
		var expiresAt any // NULL: never
		if !r.ExpiresAt.IsZero() {
			if !r.ExpiresAt.After(time.Now()) {
				return nil
			}
			expiresAt = r.ExpiresAt
		}
		value := r.Value
		if value == nil {
			value = []byte{} // nil would be NULL
		}
		batch = append(batch, []any{r.Key, value, expiresAt})
		if len(batch) == importBatch {
			return flush()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("pgstore: import: %w", err)
	}
	if err := flush(); err != nil {
		return 0, err
	}
	cctx, cancel := s.bound(ctx)
	defer cancel()
	if err := ptx.Commit(cctx); err != nil {
		return 0, s.wrap(ctx, "import: commit", err)
	}
	return n, nil
}

// Export calls fn with every live record, in ascending byte order of keys, with its
// expires_at, from one REPEATABLE READ snapshot (liveness is decided by the database's
// clock at the start of that transaction). It reads in pages of maxPage records.
func (s *Store) Export(ctx context.Context, fn func(storage.Record) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	bctx, cancel := s.bound(ctx)
	ptx, err := s.pool.BeginTx(bctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	cancel()
	if err != nil {
		return s.wrap(ctx, "export: begin", err)
	}
	defer s.rollback(ptx)
	var after []byte // nil: the first page
	for {
		page, err := s.exportPage(ctx, ptx, after)
		if err != nil {
			return err
		}
		for _, r := range page {
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(page) < maxPage {
			return nil
		}
		after = page[len(page)-1].Key
	}
}

func (s *Store) exportPage(ctx context.Context, ptx pgx.Tx, after []byte) ([]storage.Record, error) {
	qctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := ptx.Query(qctx, sqlExportPage, after, maxPage)
	if err != nil {
		return nil, s.wrap(ctx, "export", err)
	}
	defer rows.Close()
	var page []storage.Record
	for rows.Next() {
		var r storage.Record
		var expiresAt *time.Time
		if err := rows.Scan(&r.Key, &r.Value, &expiresAt); err != nil {
			return nil, s.wrap(ctx, "export", err)
		}
		if r.Value == nil {
			r.Value = []byte{}
		}
		if expiresAt != nil {
			r.ExpiresAt = *expiresAt
		}
		page = append(page, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(ctx, "export", err)
	}
	return page, nil
}
