package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/palmgate/palmgate/storage"
)

// errRetryable marks a serialization failure or deadlock: the transaction was rolled
// back and may be run again from scratch.
var errRetryable = errors.New("pgstore: serialization failure or deadlock")

// wrap adds op to an error from pgx and marks it: errRetryable for serialization
// failures and deadlocks, storage.ErrUnavailable for a database that cannot be
// reached or does not answer in time. An error caused by ctx ending is not
// unavailability: it is the caller's.
func (s *Store) wrap(ctx context.Context, op string, err error) error {
	switch {
	case isRetryable(err):
		return fmt.Errorf("pgstore: %s: %w: %w", op, errRetryable, err)
	case ctx.Err() != nil:
		return fmt.Errorf("pgstore: %s: %w", op, errors.Join(ctx.Err(), err))
	case isUnavailable(err):
		return fmt.Errorf("pgstore: %s on %s: %w: %w", op, s.host, storage.ErrUnavailable, err)
	}
	return fmt.Errorf("pgstore: %s: %w", op, err)
}

// classify is wrap for Open, whose messages name the host already.
func (s *Store) classify(ctx context.Context, err error) error {
	if ctx.Err() == nil && isUnavailable(err) {
		return fmt.Errorf("%w: %w", storage.ErrUnavailable, err)
	}
	return err
}

// isRetryable reports a serialization failure or a deadlock.
func isRetryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

// isUnavailable reports an error that says the database cannot be reached, went
// away, or did not answer in time.
func isUnavailable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		c := pgErr.Code
		return strings.HasPrefix(c, "08") || // connection exception
			strings.HasPrefix(c, "53") || // insufficient resources: too many connections, disk full
			c == "57014" || // query canceled: statement_timeout (ctx cancellations are excluded by wrap)
			c == "57P01" || c == "57P02" || c == "57P03" || // shutting down, crashed, starting up
			c == "25006" // read-only transaction: a standby, during a failover
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) ||
		errors.As(err, &netErr) ||
		pgconn.Timeout(err) ||
		errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded) // ConnectTimeout, the caller's ctx being live
}

// connectionLost reports an error that ended the connection itself: a transport
// failure, or the server closing it (shutting down, crashed, starting up).
func connectionLost(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return !pgconn.Timeout(err) && !errors.Is(err, context.DeadlineExceeded)
	}
	c := pgErr.Code
	return strings.HasPrefix(c, "08") || c == "57P01" || c == "57P02" || c == "57P03"
}
