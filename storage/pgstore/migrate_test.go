package pgstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/palmgate/palmgate/internal/pgtest"
)

// TestMigrateConcurrently opens several stores on an empty database at once: all
// succeed and each schema step is applied once.
func TestMigrateConcurrently(t *testing.T) {
	dsn := pgtest.DSN(t)
	const n = 4
	stores := make([]*Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = Open(t.Context(), config(t, dsn))
		})
	}
	close(start)
	wg.Wait()
	applied := 0
	for i := range n {
		if errs[i] != nil {
			t.Errorf("Open %d: %v", i, errs[i])
			continue
		}
		applied += stores[i].migrated
		closeT(t, stores[i])
	}
	if applied != len(migrations) {
		t.Errorf("the %d Opens applied %d schema steps in all, want %d (each once)", n, applied, len(migrations))
	}
	var version int
	if err := sqlConn(t, dsn).QueryRow(t.Context(), "SELECT version FROM palmgate_schema WHERE id = 1").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != len(migrations) {
		t.Errorf("schema version %d, want %d", version, len(migrations))
	}
	// A store on the migrated database works, and a second Open applies nothing.
	s := closeT(t, openT(t, config(t, dsn)))
	if s.migrated != 0 {
		t.Errorf("Open of an up-to-date database applied %d steps", s.migrated)
	}
}

// TestSchemaTooNew checks that Open refuses a database migrated by a newer palmgate.
func TestSchemaTooNew(t *testing.T) {
	dsn := pgtest.DSN(t)
	openT(t, config(t, dsn)).Close()
	if _, err := sqlConn(t, dsn).Exec(t.Context(), "UPDATE palmgate_schema SET version = 999"); err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.Context(), config(t, dsn))
	if err == nil {
		s.Close()
		t.Fatal("Open of a database at schema version 999 succeeded")
	}
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Errorf("Open = %v, want ErrSchemaTooNew", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "999") || !strings.Contains(msg, strconv.Itoa(len(migrations))) {
		t.Errorf("Open = %q, want both versions (999 and %d) named", msg, len(migrations))
	}
}

// TestOpenWaitsForRunningMigration holds the schema lock from a test connection, as
// an instance migrating a large table does (step 4 rebuilds an index for minutes),
// and starts a store with a statement timeout far shorter than that wait: the Open
// says in the log that it waits, and on what, then opens once the migration commits,
// applying no step a second time. It does so whether the other instance is still
// running its steps or already recording the new version (its row then updated, not
// only locked).
func TestOpenWaitsForRunningMigration(t *testing.T) {
	for _, recording := range []bool{false, true} {
		t.Run(map[bool]string{false: "running steps", true: "recording the version"}[recording], func(t *testing.T) {
			testOpenWaitsForMigration(t, recording)
		})
	}
}

func testOpenWaitsForMigration(t *testing.T, recording bool) {
	dsn := pgtest.DSN(t)
	openT(t, config(t, dsn)).Close()
	conn := sqlConn(t, dsn)
	ctx := t.Context()
	// The other instance's migration: from the previous version, under the row lock.
	if _, err := conn.Exec(ctx, "UPDATE palmgate_schema SET version = $1", len(migrations)-1); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SELECT version FROM palmgate_schema WHERE id = 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	finish := func() {
		if _, err := tx.Exec(ctx, migrations[len(migrations)-1]); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "UPDATE palmgate_schema SET version = $1", len(migrations)); err != nil {
			t.Fatal(err)
		}
	}
	if recording {
		finish()
	}

	waiting := make(chan string, 1)
	core, logs := observer.New(zap.InfoLevel)
	log := zap.New(core, zap.Hooks(func(e zapcore.Entry) error {
		if strings.Contains(e.Message, "waiting") {
			select {
			case waiting <- e.Message:
			default:
			}
		}
		return nil
	}))
	cfg := config(t, dsn)
	cfg.Logger = log
	cfg.StatementTimeout = 50 * time.Millisecond
	type result struct {
		s   *Store
		err error
	}
	opened := make(chan result, 1)
	go func() {
		s, err := Open(context.Background(), cfg)
		opened <- result{s, err}
	}()
	select {
	case r := <-opened:
		if r.s != nil {
			r.s.Close()
		}
		t.Fatalf("Open returned while another instance held the schema lock, without waiting for it: %v", r.err)
	case msg := <-waiting:
		if !strings.Contains(msg, "palmgate_schema") {
			t.Errorf("waiting log line %q does not name what it waits on (palmgate_schema)", msg)
		}
	}
	// The other instance finishes its migration.
	if !recording {
		finish()
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-opened
	if r.err != nil {
		t.Fatalf("Open after the other instance's migration committed: %v", r.err)
	}
	closeT(t, r.s)
	if r.s.migrated != 0 {
		t.Errorf("Open applied %d schema steps the other instance had applied", r.s.migrated)
	}
	if n := logs.FilterMessageSnippet("migrated the schema").Len(); n != 0 {
		t.Errorf("Open logged that it migrated the schema %d times", n)
	}
}
