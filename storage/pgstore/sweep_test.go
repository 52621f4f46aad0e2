package pgstore

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/pgtest"
	"github.com/palmgate/palmgate/storage"
)

// TestSweep checks that the sweeper physically deletes expired records, in batches of
// at most SweepBatch, and leaves live ones.
func TestSweep(t *testing.T) {
	dsn := pgtest.DSN(t)
	cfg := config(t, dsn)
	cfg.SweepBatch = 10
	cfg.SweepInterval = 50 * time.Millisecond
	var mu sync.Mutex
	var batches []int64
	s, err := open(t.Context(), cfg, func(n int64) {
		mu.Lock()
		batches = append(batches, n)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	closeT(t, s)
	const expiring, kept = 35, 5
	err = s.Update(t.Context(), func(tx storage.Txn) error {
		for i := range expiring {
			if err := tx.Set(fmt.Appendf(nil, "exp/%02d", i), []byte("v"), 100*time.Millisecond); err != nil {
				return err
			}
		}
		for i := range kept {
			if err := tx.Set(fmt.Appendf(nil, "kept/%d", i), []byte("v"), time.Hour); err != nil {
				return err
			}
			if err := tx.Set(fmt.Appendf(nil, "forever/%d", i), []byte("v"), 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	conn := sqlConn(t, dsn)
	rows := func() int {
		var n int
		if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM palmgate_kv").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// The expiring rows live 100 ms: on a busy machine the sweeper may have taken
	// some or all of them before this count, so it is bounded, not exact; the sum
	// of the sweeper's batches below proves that every one was written and swept.
	if n := rows(); n < 2*kept || n > expiring+2*kept {
		t.Fatalf("%d rows after the writes, want %d to %d", n, 2*kept, expiring+2*kept)
	}
	deadline := time.Now().Add(10 * time.Second)
	for rows() != 2*kept {
		if time.Now().After(deadline) {
			t.Fatalf("%d rows 10s after the records expired, want %d: the sweeper did not delete them", rows(), 2*kept)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var live int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM palmgate_kv WHERE key >= 'kept/' OR key >= 'forever/' AND key < 'forever0'").Scan(&live); err != nil {
		t.Fatal(err)
	}
	if live != 2*kept {
		t.Errorf("%d live rows left, want %d", live, 2*kept)
	}
	mu.Lock()
	defer mu.Unlock()
	var sum int64
	for _, n := range batches {
		if n > int64(cfg.SweepBatch) {
			t.Errorf("a sweep batch deleted %d records, more than SweepBatch (%d)", n, cfg.SweepBatch)
		}
		sum += n
	}
	if sum != expiring {
		t.Errorf("sweep batches %v deleted %d records in all, want %d", batches, sum, expiring)
	}
	if got := s.Stats().Swept; got != expiring {
		t.Errorf("Stats.Swept = %d, want %d", got, expiring)
	}
}

// TestSweepSparesRecordSetAgain checks that a record set again without a ttl after it
// expired is not swept.
func TestSweepSparesRecordSetAgain(t *testing.T) {
	cfg := config(t, pgtest.DSN(t))
	cfg.SweepInterval = -1
	s := closeT(t, openT(t, cfg))
	set := func(ttl time.Duration) {
		if err := s.Update(t.Context(), func(tx storage.Txn) error { return tx.Set([]byte("k"), []byte("v"), ttl) }); err != nil {
			t.Fatal(err)
		}
	}
	set(time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	set(0)
	s.sweep(t.Context())
	err := s.View(t.Context(), func(tx storage.Txn) error { _, err := tx.Get([]byte("k")); return err })
	if err != nil {
		t.Errorf("Get after sweeping a record set again without ttl: %v", err)
	}
}
