package pgstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/palmgate/palmgate/internal/pgtest"
	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/storagetest"
)

func TestCloseIdempotentAndUseAfterClose(t *testing.T) {
	storagetest.RunClosed(t, func(t *testing.T) storage.Store { return openT(t, config(t, pgtest.DSN(t))) }, ErrClosed)
}

func TestCanceledContext(t *testing.T) {
	s := closeT(t, openT(t, config(t, pgtest.DSN(t))))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	called := false
	fn := func(storage.Txn) error { called = true; return nil }
	if err := s.Update(ctx, fn); !errors.Is(err, context.Canceled) || errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Update with canceled ctx = %v, want context.Canceled (and not ErrUnavailable)", err)
	}
	if err := s.View(ctx, fn); !errors.Is(err, context.Canceled) || errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("View with canceled ctx = %v, want context.Canceled (and not ErrUnavailable)", err)
	}
	if called {
		t.Error("fn ran despite the canceled context")
	}
}

// TestOpenBadDSN checks that a DSN that does not parse is an error that does not
// repeat the password, and that is not mistaken for an unavailable database.
func TestOpenBadDSN(t *testing.T) {
	for _, dsn := range []string{
		"",
		"postgres://u:s3cretpw@db.example:99999/palmgate",
		"postgres://u:s3cretpw@db.example/palmgate?sslmode=bogus",
		"host=db.example password=s3cretpw port=abc",
	} {
		s, err := Open(t.Context(), Config{DSN: dsn})
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", dsn)
			continue
		}
		if strings.Contains(err.Error(), "s3cretpw") {
			t.Errorf("Open(%q) = %q names the password", dsn, err)
		}
		if errors.Is(err, storage.ErrUnavailable) {
			t.Errorf("Open(%q) = %v, wrapping storage.ErrUnavailable", dsn, err)
		}
	}
}

// TestConfigErrors checks that each invalid option is refused, named, before any
// connection is attempted.
func TestConfigErrors(t *testing.T) {
	const dsn = "postgres://u@127.0.0.1:1/db"
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no DSN", Config{}, "no DSN"},
		{"MaxConns", Config{DSN: dsn, MaxConns: -1}, "MaxConns"},
		{"StatementTimeout", Config{DSN: dsn, StatementTimeout: -time.Second}, "StatementTimeout"},
		{"ConnectTimeout", Config{DSN: dsn, ConnectTimeout: -time.Second}, "ConnectTimeout"},
		{"SweepBatch", Config{DSN: dsn, SweepBatch: -1}, "SweepBatch"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Open(t.Context(), c.cfg)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), c.want) || errors.Is(err, storage.ErrUnavailable) {
				t.Errorf("Open = %v, want an error naming %s (and not ErrUnavailable)", err, c.want)
			}
		})
	}
	pcfg, err := poolConfig(Config{DSN: dsn, StatementTimeout: 100 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	if got := pcfg.ConnConfig.RuntimeParams["statement_timeout"]; got != "1" {
		t.Errorf("statement_timeout for a 100µs StatementTimeout = %q, want 1 (ms), not 0 (no timeout)", got)
	}
}

// TestOpenMissingDatabase checks that a database that does not exist is a
// configuration error naming the host, not storage.ErrUnavailable.
func TestOpenMissingDatabase(t *testing.T) {
	dsn, err := pgtest.WithDatabase(pgtest.DSN(t), "palmgate_no_such_db")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.Context(), config(t, dsn))
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded")
	}
	if errors.Is(err, storage.ErrUnavailable) || !strings.Contains(err.Error(), "palmgate_no_such_db") {
		t.Errorf("Open = %v, want an error naming the database, not wrapping storage.ErrUnavailable", err)
	}
}

// TestWarnsWithoutSynchronousCommit checks that Open warns when the database answers
// commits before they are on disk.
func TestWarnsWithoutSynchronousCommit(t *testing.T) {
	dsn := pgtest.DSN(t)
	var name string
	conn := sqlConn(t, dsn)
	if err := conn.QueryRow(t.Context(), "SELECT current_database()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		setting  string
		wantWarn bool
	}{{"on", false}, {"off", true}} {
		if _, err := conn.Exec(t.Context(), "ALTER DATABASE "+name+" SET synchronous_commit = "+c.setting); err != nil {
			t.Fatal(err)
		}
		core, logs := observer.New(zap.WarnLevel)
		s, err := Open(t.Context(), Config{DSN: dsn, Logger: zap.New(core)})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		warned := logs.FilterMessageSnippet("synchronous_commit off").Len() > 0
		if warned != c.wantWarn {
			t.Errorf("synchronous_commit=%s: warned %v, want %v (logs: %v)", c.setting, warned, c.wantWarn, logs.All())
		}
	}
}
