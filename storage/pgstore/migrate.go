package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"

	"github.com/palmgate/palmgate/storage"
)

// migrations are the steps of palmgate's schema, in order: the schema at version v
// is the result of the first v steps. Steps are only ever appended, never edited, and
// never destroy data (no DROP, no narrowing ALTER), so that an instance still running
// the previous release keeps working on the upgraded schema during a rolling update.
var migrations = []string{
	// 1: the records.
	`CREATE TABLE IF NOT EXISTS palmgate_kv (
	key BYTEA PRIMARY KEY,
	value BYTEA NOT NULL,
	expires_at TIMESTAMPTZ NULL
)`,
	// 2: lets the sweeper find expired records without scanning the table.
	`CREATE INDEX IF NOT EXISTS palmgate_kv_expires_at ON palmgate_kv (expires_at) WHERE expires_at IS NOT NULL`,
	// 3: point reads by a hash index: serializable transactions then hold predicate
	// locks on hash buckets, not on the B-tree pages that concurrent inserts of
	// neighbouring keys touch (prefix scans still use the primary key).
	`CREATE INDEX IF NOT EXISTS palmgate_kv_key_hash ON palmgate_kv USING hash (key)`,
	// 4: a third as many keys per hash bucket (an index 2.5 times as large), so
	// that a read of an absent key conflicts with fewer unrelated inserts (under 64
	// concurrent registrations, 0.12 serialization failures per registration
	// instead of 0.40). The rebuild takes about 2 s per million records, during
	// which writes wait.
	`SET LOCAL statement_timeout = ` + slowStepTimeout + `;
ALTER INDEX palmgate_kv_key_hash SET (fillfactor = 25);
REINDEX INDEX palmgate_kv_key_hash`,
}

// slowStepTimeout bounds a step that rebuilds an index (SET LOCAL
// statement_timeout); slowStepBound is the same bound on the client's side.
const (
	slowStepTimeout = `'5min'`
	slowStepBound   = 5 * time.Minute
)

// migrationWait is the longest an Open waits for another instance's migration
// (the lock on palmgate_schema's row), beyond twice its client timeout: as long as
// that instance's slow step may run.
const migrationWait = slowStepBound

// ErrSchemaTooNew is returned (wrapped) by Open when the database's schema was
// written by a newer palmgate than this one.
var ErrSchemaTooNew = errors.New("pgstore: database schema is newer than this palmgate knows")

// maxMigrateAttempts bounds the attempts of migrate when it races another instance.
const maxMigrateAttempts = 5

// migrate brings the schema to the latest version. The version is kept in the one row
// of palmgate_schema, which every instance locks (SELECT ... FOR UPDATE) for the
// transaction that applies the missing steps: instances starting together apply each
// step once, one after the other. (A row lock rather than an advisory lock, which
// CockroachDB does not have.)
func (s *Store) migrate(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		err := s.migrateOnce(ctx)
		if err == nil || attempt >= maxMigrateAttempts || !raced(err) {
			return err
		}
		if err := storage.Sleep(ctx, retryPause.Before(attempt+4)); err != nil {
			return fmt.Errorf("pgstore: migrating the schema on %s: %w", s.host, err)
		}
	}
}

// raced reports an error that another instance creating the same objects at the same
// time can cause: PostgreSQL's CREATE TABLE IF NOT EXISTS is not safe against a
// concurrent one (it fails with a unique violation on the catalogs, or "type already
// exists"), and a serializable database (CockroachDB) can abort the transaction that
// waited for the lock. The next attempt finds the other instance's work done.
func raced(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "23505", "42P07", "42710", "40001", "40P01":
		return true
	}
	return false
}

func (s *Store) migrateOnce(caller context.Context) error {
	fail := func(what string, err error) error {
		return fmt.Errorf("pgstore: migrating the schema on %s: %s: %w", s.host, what, s.classify(caller, err))
	}
	// This bounds the statements other than the wait for another instance's
	// migration (lockSchema) on the client, should the server go silent.
	ctx, cancel := context.WithTimeout(caller, 2*s.clientTimeout)
	defer cancel()
	if _, err := s.pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS palmgate_schema (id INT PRIMARY KEY, version INT NOT NULL)`); err != nil {
		return fail("creating palmgate_schema", err)
	}
	// A plain read never waits for a migrating instance, where the INSERT below
	// would (on the row it updates) under statement_timeout.
	var committed int
	switch err := s.pool.QueryRow(ctx, `SELECT version FROM palmgate_schema WHERE id = 1`).Scan(&committed); {
	case errors.Is(err, pgx.ErrNoRows):
		if _, err := s.pool.Exec(ctx, `INSERT INTO palmgate_schema (id, version) VALUES (1, 0) ON CONFLICT (id) DO NOTHING`); err != nil {
			return fail("initialising palmgate_schema", err)
		}
	case err != nil:
		return fail("reading palmgate_schema", err)
	case committed == len(migrations):
		return nil // up to date: nothing to lock
	}
	tx, version, err := s.lockSchema(caller, ctx)
	if err != nil {
		return fail("locking palmgate_schema", err)
	}
	defer tx.Rollback(context.Background())
	// The wait for the lock may have outlasted ctx.
	ctx, cancel = context.WithTimeout(caller, 2*s.clientTimeout)
	defer cancel()
	latest := len(migrations)
	if version > latest {
		return fmt.Errorf("%w: %s is at schema version %d, this binary knows versions up to %d; run a palmgate at least as new as the one that upgraded it",
			ErrSchemaTooNew, s.host, version, latest)
	}
	if version == latest {
		return nil // the transaction only read; rolling it back releases the lock
	}
	stepCtx, cancel := context.WithTimeout(caller, 2*s.clientTimeout+slowStepBound)
	defer cancel()
	for v := version + 1; v <= latest; v++ {
		if _, err := tx.Exec(stepCtx, migrations[v-1]); err != nil {
			return fail(fmt.Sprintf("step %d", v), err)
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE palmgate_schema SET version = $1 WHERE id = 1`, latest); err != nil {
		return fail("recording the version", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fail("commit", err)
	}
	s.migrated = latest - version
	s.log.Info("pgstore: migrated the schema", zap.String("database", s.host),
		zap.Int("from_version", version), zap.Int("to_version", latest))
	return nil
}

// lockSchema begins the migration's transaction and locks palmgate_schema's row,
// returning the version it holds. When another instance holds the lock (it is
// migrating, perhaps rebuilding an index for minutes), it says so in the log and
// waits for that instance's commit, up to migrationWait plus twice clientTimeout,
// however short statement_timeout or the DSN's lock_timeout are; the version it
// then reads is the one that instance wrote, so no step runs twice. ctx bounds the
// other round trips.
func (s *Store) lockSchema(caller, ctx context.Context) (pgx.Tx, int, error) {
	const lock = `SELECT version FROM palmgate_schema WHERE id = 1 FOR UPDATE`
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, 0, err
	}
	var version int
	err = tx.QueryRow(ctx, lock+` NOWAIT`).Scan(&version)
	if err == nil {
		return tx, version, nil
	}
	tx.Rollback(context.Background())
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55P03" { // lock_not_available
		return nil, 0, err
	}
	wait := migrationWait + 2*s.clientTimeout
	s.log.Info("pgstore: waiting for another instance's schema migration (the row lock on palmgate_schema) before starting",
		zap.String("database", s.host), zap.Duration("up_to", wait))
	wctx, cancel := context.WithTimeout(caller, wait+s.clientTimeout)
	defer cancel()
	if tx, err = s.pool.Begin(ctx); err != nil {
		return nil, 0, err
	}
	ms := strconv.FormatInt(wait.Milliseconds(), 10)
	if _, err = tx.Exec(ctx, `SET LOCAL statement_timeout = `+ms+`; SET LOCAL lock_timeout = 0`); err == nil {
		err = tx.QueryRow(wctx, lock).Scan(&version)
	}
	if err == nil {
		// Back to the store's own timeouts for the steps (RESET: the connection's).
		// wctx: the wait may have outlasted ctx.
		_, err = tx.Exec(wctx, `RESET statement_timeout; RESET lock_timeout`)
	}
	if err != nil {
		tx.Rollback(context.Background())
		if errors.As(err, &pgErr) && (pgErr.Code == "57014" || pgErr.Code == "55P03") {
			err = fmt.Errorf("another instance's schema migration held palmgate_schema longer than %v: %w", wait, err)
		}
		return nil, 0, err
	}
	return tx, version, nil
}
