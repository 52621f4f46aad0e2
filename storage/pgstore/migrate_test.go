package pgstore

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"

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
