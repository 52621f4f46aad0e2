// Package pgstore implements storage.Store on PostgreSQL (with github.com/jackc/pgx/v5),
// so that several palmgate instances behind one load balancer can share their state.
//
// Records live in one table, palmgate_kv (key bytea PRIMARY KEY, value bytea,
// expires_at timestamptz NULL), whose schema Open creates and upgrades (migrate.go).
//
// Isolation. Update runs in a SERIALIZABLE transaction, retried from scratch on a
// serialization failure or deadlock (SQLSTATE 40001, 40P01), which is what the
// storage.Store contract asks of it. View runs in a REPEATABLE READ, READ ONLY
// transaction: on PostgreSQL that is one snapshot for the whole transaction, what
// View promises, and it can neither fail with a serialization error nor wait.
// SERIALIZABLE READ ONLY DEFERRABLE would also rule out the rare read-only anomaly of
// snapshot isolation (a snapshot that no serial order of the writers produces), but
// it can wait for a safe snapshot for as long as writers keep overlapping it, which a
// login page should not (CockroachDB, serializable throughout, takes DEFERRABLE as a
// no-op, and REPEATABLE READ as SERIALIZABLE unless told otherwise).
//
// Grouped commits. Under load, the concurrent Updates of one instance share one
// SERIALIZABLE transaction, one group at a time (group.go): their fns run side by
// side, their reads go out together round by round, and their writes with one
// COMMIT; a member whose keys meet another member's writes runs alone afterwards.
// Each Update has an outcome one of the serial orders gives, and a group's failure
// only sends its members to run alone. Without load an Update runs alone.
// Config.NoGroupCommits turns grouping off.
//
// Time to live. Expiry is decided by the database's clock, not the instance's:
// a record written with a ttl expires at now()+ttl (now() being the start of the
// writing transaction) and every read skips records whose expires_at <= now(). Several
// instances whose clocks disagree therefore still agree on which records are live. A
// background sweeper deletes expired records in bounded batches (sweep.go).
//
// Durability. A successful Update has been committed by the server, which with
// synchronous_commit on (PostgreSQL's default; pgstore never changes it, and Open
// warns when the server has it off) means its WAL is on disk.
//
// Errors. Failures to reach the database, lost connections and timeouts are returned
// wrapping storage.ErrUnavailable: ConnectTimeout bounds making a connection, the
// server's statement_timeout (StatementTimeout) a statement, and a client-side bound
// of ConnectTimeout+StatementTimeout+1s each round trip, for a connection that went
// silent without an error (a network partition). A connection lost before an Update
// asked to commit is retried on another one; lost during the commit (which carries
// the transaction's last writes, see txn), the outcome is unknown and reported as
// such. Misconfiguration (a bad DSN, a wrong password, a
// missing database) is not unavailability.
//
// CockroachDB. The SQL is kept to what CockroachDB also runs (no advisory locks, no
// LISTEN/NOTIFY, INSERT ... ON CONFLICT, SELECT ... FOR UPDATE, partial indexes), but
// only PostgreSQL 15 is tested. Untested on CockroachDB, and so open to surprises:
// the migrations (CockroachDB runs DDL inside a transaction with caveats, and its
// schema changes are asynchronous), the interval arithmetic of Set, the
// statement_timeout and plan_cache_mode runtime parameters, the batched statements
// of txn.go (unnest joins, DELETE ... USING, a BEGIN pipelined with the first
// statement), the sweeper's DELETE with a subquery, grouped commits (group.go), and
// the retry loop under CockroachDB's own retry errors (also 40001, which it may return
// from a View as well: View reports those as storage.ErrConflict instead of running
// fn again).
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/palmgate/palmgate/storage"
)

const (
	// DefaultMaxConns is the default Config.MaxConns.
	DefaultMaxConns = 10
	// DefaultStatementTimeout is the default Config.StatementTimeout.
	DefaultStatementTimeout = 5 * time.Second
	// DefaultConnectTimeout is the default Config.ConnectTimeout.
	DefaultConnectTimeout = 5 * time.Second
	// DefaultSweepInterval is the default Config.SweepInterval.
	DefaultSweepInterval = time.Minute
	// DefaultSweepBatch is the default Config.SweepBatch.
	DefaultSweepBatch = 1000

	// maxAttempts bounds how many times Update runs fn when its transaction keeps
	// failing with serialization failures or deadlocks.
	maxAttempts = 32
	// optimisticAttempts is how many attempts run concurrently with this store's
	// other Updates. Later ones run while no other Update of this store does (see
	// Store.writeMu), so that a transaction on a hot key is not starved by luckier
	// ones of the same instance; other instances' still compete.
	optimisticAttempts = 8
	// maxUnavailableRetries bounds how many times an Update whose connection failed
	// before it asked to commit (a pooled connection that a database restart broke,
	// say) is run again on another connection, and how many times a transaction's
	// first round trip is sent again on another one (see txn.roundTrip).
	maxUnavailableRetries = 2
	// minBackoff and maxBackoff bound the jittered exponential pause between
	// attempts: the ceiling doubles per attempt from minBackoff up to maxBackoff and
	// the pause is drawn uniformly below it.
	minBackoff = 1 * time.Millisecond
	maxBackoff = 100 * time.Millisecond
)

// retryPause is the pause between attempts.
var retryPause = storage.Backoff{Min: minBackoff, Max: maxBackoff}

// ErrClosed is returned by Update and View once the store has been closed.
var ErrClosed = errors.New("pgstore: store is closed")

// Config configures Open.
type Config struct {
	// DSN is the PostgreSQL connection string, as a URL
	// (postgres://user:password@host:5432/palmgate?sslmode=verify-full) or in
	// keyword/value form (host=... dbname=...). Required.
	DSN string
	// MaxConns is the most connections the store keeps open to the database. Zero
	// means DefaultMaxConns (not the DSN's pool_max_conns, which this overrides).
	MaxConns int32
	// StatementTimeout makes the server cancel any one statement that runs longer
	// (statement_timeout). The resulting error wraps storage.ErrUnavailable. Zero
	// means DefaultStatementTimeout.
	StatementTimeout time.Duration
	// ConnectTimeout bounds establishing one connection, Open included. Zero means
	// the DSN's connect_timeout, or DefaultConnectTimeout when it has none.
	ConnectTimeout time.Duration
	// SweepInterval is how often expired records are deleted. Zero means
	// DefaultSweepInterval; a negative value disables sweeping (another instance
	// sweeps, say). Expired records are invisible to reads either way.
	SweepInterval time.Duration
	// SweepBatch is the most expired records one DELETE removes; a sweep runs batches
	// until one deletes fewer. Zero means DefaultSweepBatch.
	SweepBatch int
	// Logger receives the store's log lines. Nil means no logging.
	Logger *zap.Logger
	// NoGroupCommits turns grouped commits off (group.go): every Update runs in a
	// transaction of its own, as it does without load. Slower under load, and
	// simpler.
	NoGroupCommits bool
	// Observer receives the durations of Update, View and ReadKey, conflict
	// retries, and the sizes of grouped commits and why members left them. Nil
	// measures nothing.
	Observer storage.Observer
}

// Stats counts events of a store since Open.
type Stats struct {
	// Retries is how many times an Update began again (running fn again) after a
	// serialization failure, a deadlock or a connection lost before commit, plus how
	// many times a transaction's first round trip was sent again on another
	// connection after its connection was lost.
	Retries uint64
	// Conflicts is how many Updates gave up with storage.ErrConflict.
	Conflicts uint64
	// Swept is how many expired records the sweeper deleted.
	Swept uint64
	// Grouped is how many writing Updates committed in a group with others
	// (group.go).
	Grouped uint64
	// Groups is how many transactions two or more Updates shared (group.go),
	// whether they then committed or not. Zero with Config.NoGroupCommits.
	Groups uint64
}

// Store is a storage.Store on a PostgreSQL database. It is safe for concurrent use.
// Close waits for transactions in flight, so fn passed to Update or View must not call
// Close.
type Store struct {
	pool *pgxpool.Pool
	log  *zap.Logger
	obs  storage.Observer // nil: nothing measured
	host string           // the database, as named in errors: host:port/dbname
	// clientTimeout bounds each round trip on the client's side (see bound).
	clientTimeout time.Duration

	// mu is held shared by every Update and View and exclusively by Close.
	mu     sync.RWMutex
	closed bool

	// maxAttempts is the constant maxAttempts, but for tests.
	maxAttempts int

	// writeMu is held shared by optimistic Update attempts and exclusively by those
	// that already failed optimisticAttempts times.
	writeMu sync.RWMutex

	retries, conflicts, swept atomic.Uint64
	roundTrips                atomic.Uint64 // of transactions and ReadKey, for tests

	// group queues Updates for grouped commits (group.go), groupLimit is the
	// bound on a group's members in force, and noGroups (Config.NoGroupCommits)
	// turns grouping off.
	group      grouping
	groupLimit atomic.Int64
	noGroups   bool
	grouped    atomic.Uint64 // writing Updates committed in a group with others
	groups     atomic.Uint64 // transactions shared by two or more Updates
	// groupCommitHook, when set (by tests), is called before a group commits.
	groupCommitHook func(*txn)

	migrated int // schema steps this Open applied (for tests)

	sweepBatch int
	// sweepHook, when set (by tests), is called with the count of each sweep batch.
	sweepHook func(deleted int64)
	stopSweep chan struct{} // closed by Close
	sweepDone chan struct{} // closed when the sweeper has returned
}

var (
	_ storage.Store     = (*Store)(nil)
	_ storage.KeyReader = (*Store)(nil)
)

// Open connects to the database of cfg.DSN, creates or upgrades palmgate's schema
// there (see migrate.go) and starts the sweeper. An unreachable database is an error
// wrapping storage.ErrUnavailable and naming the host (never the password), returned
// within about cfg.ConnectTimeout.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	return open(ctx, cfg, nil)
}

// open is Open with a hook for tests, set before the sweeper starts.
func open(ctx context.Context, cfg Config, sweepHook func(deleted int64)) (*Store, error) {
	pcfg, err := poolConfig(cfg)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	cc := pcfg.ConnConfig
	s := &Store{
		log:         log,
		obs:         cfg.Observer,
		host:        describe(cc.Host, cc.Port, cc.Database),
		maxAttempts: maxAttempts,
		noGroups:    cfg.NoGroupCommits,
		sweepBatch:  orDefault(cfg.SweepBatch, DefaultSweepBatch),
		sweepHook:   sweepHook,
		// Long enough for a connection to be made and a statement to run into
		// the server's statement_timeout, which normally ends it first.
		clientTimeout: cc.ConnectTimeout +
			orDefault(cfg.StatementTimeout, DefaultStatementTimeout) + time.Second,
		stopSweep: make(chan struct{}),
		sweepDone: make(chan struct{}),
	}
	s.groupLimit.Store(maxGroupSize)
	s.pool, err = pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: opening %s: %w", s.host, err)
	}
	connectTimeout := cc.ConnectTimeout
	pingCtx, cancel := context.WithTimeout(ctx, connectTimeout)
	err = s.pool.Ping(pingCtx)
	cancel()
	if err != nil {
		s.pool.Close()
		source := ""
		if cfg.ConnectTimeout == 0 && connectTimeout != DefaultConnectTimeout {
			source = ", the DSN's connect_timeout"
		}
		return nil, fmt.Errorf("pgstore: connecting to PostgreSQL at %s (connect timeout %v%s): %w",
			s.host, connectTimeout, source, s.classify(ctx, err))
	}
	if err := s.migrate(ctx); err != nil {
		s.pool.Close()
		return nil, err
	}
	s.checkSynchronousCommit(ctx)
	interval := orDefault(cfg.SweepInterval, DefaultSweepInterval)
	if interval > 0 {
		go s.runSweeper(interval)
	} else {
		close(s.sweepDone)
	}
	return s, nil
}

// poolConfig parses cfg.DSN and applies cfg's limits and timeouts.
func poolConfig(cfg Config) (*pgxpool.Config, error) {
	switch {
	case cfg.DSN == "":
		return nil, errors.New("pgstore: no DSN configured")
	case cfg.MaxConns < 0:
		return nil, fmt.Errorf("pgstore: MaxConns %d is negative", cfg.MaxConns)
	case cfg.StatementTimeout < 0:
		return nil, fmt.Errorf("pgstore: StatementTimeout %v is negative", cfg.StatementTimeout)
	case cfg.ConnectTimeout < 0:
		return nil, fmt.Errorf("pgstore: ConnectTimeout %v is negative", cfg.ConnectTimeout)
	case cfg.SweepBatch < 0:
		return nil, fmt.Errorf("pgstore: SweepBatch %d is negative", cfg.SweepBatch)
	}
	pcfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		// pgconn's parse errors do not repeat the password.
		return nil, fmt.Errorf("pgstore: parsing the DSN: %w", err)
	}
	pcfg.MaxConns = orDefault(cfg.MaxConns, DefaultMaxConns)
	if pcfg.MinConns > pcfg.MaxConns {
		pcfg.MinConns = pcfg.MaxConns
	}
	// The DSN's own connect_timeout when ConnectTimeout is unset (see connectTimeout).
	if cfg.ConnectTimeout > 0 || pcfg.ConnConfig.ConnectTimeout <= 0 {
		pcfg.ConnConfig.ConnectTimeout = orDefault(cfg.ConnectTimeout, DefaultConnectTimeout)
	}
	rp := pcfg.ConnConfig.RuntimeParams
	// In whole milliseconds, rounded up: 0 would mean no timeout at all.
	ms := (orDefault(cfg.StatementTimeout, DefaultStatementTimeout) + time.Millisecond - 1).Milliseconds()
	rp["statement_timeout"] = strconv.FormatInt(ms, 10)
	if rp["application_name"] == "" {
		rp["application_name"] = "palmgate"
	}
	// pgx prepares each statement once per connection; PostgreSQL would still plan
	// the array ones at every run (their generic plan's estimate of ten keys looks
	// dearer than a custom plan's few), at about the cost of running them. Their
	// generic plans are the ones TestPointReadsUseHashIndex checks.
	if rp["plan_cache_mode"] == "" {
		rp["plan_cache_mode"] = "force_generic_plan"
	}
	return pcfg, nil
}

// orDefault returns v, or def when v is zero.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// describe names a database for messages: host:port/dbname, or socket dir and port.
func describe(host string, port uint16, db string) string {
	return net.JoinHostPort(host, strconv.Itoa(int(port))) + "/" + db
}

// checkSynchronousCommit warns when the server would answer commits before they are
// on disk. A failed check (a server without the setting) is only logged.
func (s *Store) checkSynchronousCommit(ctx context.Context) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var v string
	if err := s.pool.QueryRow(ctx, "SHOW synchronous_commit").Scan(&v); err != nil {
		s.log.Debug("pgstore: could not read synchronous_commit", zap.Error(err))
		return
	}
	if v == "off" {
		s.log.Warn("PostgreSQL has synchronous_commit off: a write palmgate answered can be lost in a crash of the database server",
			zap.String("database", s.host))
	}
}

// Database names the store's database as its messages do: host:port/dbname, never
// the password.
func (s *Store) Database() string { return s.host }

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	return Stats{Retries: s.retries.Load(), Conflicts: s.conflicts.Load(), Swept: s.swept.Load(),
		Grouped: s.grouped.Load(), Groups: s.groups.Load()}
}

// newTxn returns a transaction on a connection from the pool, to begin with the
// statement begin.
func (s *Store) newTxn(ctx context.Context, begin string, readOnly bool) (*txn, error) {
	conn, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	return &txn{s: s, ctx: ctx, conn: conn, begin: begin, readOnly: readOnly}, nil
}

// acquire takes a connection from the pool, waiting at most clientTimeout.
func (s *Store) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	bctx, cancel := s.bound(ctx)
	defer cancel()
	conn, err := s.pool.Acquire(bctx)
	if err != nil {
		return nil, s.wrap(ctx, "connect", err)
	}
	return conn, nil
}

// Close stops the sweeper and closes the connections, after waiting for the
// transactions in flight; connections that an unresponsive database keeps from
// closing within about ConnectTimeout+StatementTimeout are left to close in the
// background. Calling it again does nothing and returns nil.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	close(s.stopSweep)
	<-s.sweepDone
	// pgx closes a connection that timed out by asking the server, on a new
	// connection, to cancel its query, for up to 15s; and pool.Close waits for that.
	// When the database has gone silent, let that finish in the background.
	closed := make(chan struct{})
	go func() {
		s.pool.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(s.clientTimeout):
		s.log.Warn("pgstore: closing connections to an unresponsive database in the background", zap.String("database", s.host))
	}
	return nil
}

// bound returns ctx limited to clientTimeout, for one round trip to the database.
// The server's statement_timeout cannot end a statement whose connection went
// silent (a network partition, a frozen server): this does, closing the connection,
// and the error wraps storage.ErrUnavailable (ctx itself being still live).
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.clientTimeout)
}

// rollback ends ptx if it is still open, waiting at most clientTimeout.
func (s *Store) rollback(ptx pgx.Tx) {
	ctx, cancel := s.bound(context.Background())
	defer cancel()
	ptx.Rollback(ctx)
}
