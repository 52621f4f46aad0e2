package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/storagetest"
)

func open(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store { return open(t, t.TempDir()) })
	storagetest.RunDurable(t, func(t *testing.T, dir string) storage.Store { return open(t, dir) })
	storagetest.RunWatcher(t, func(t *testing.T) storage.Store { return open(t, t.TempDir()) })
}

func TestCloseIdempotentAndUseAfterClose(t *testing.T) {
	storagetest.RunClosed(t, func(t *testing.T) storage.Store { return open(t, t.TempDir()) }, ErrClosed)
}

func TestCanceledContext(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	called := false
	fn := func(storage.Txn) error { called = true; return nil }
	if err := s.Update(ctx, fn); !errors.Is(err, context.Canceled) {
		t.Errorf("Update with canceled ctx = %v, want context.Canceled", err)
	}
	if err := s.View(ctx, fn); !errors.Is(err, context.Canceled) {
		t.Errorf("View with canceled ctx = %v, want context.Canceled", err)
	}
	if called {
		t.Error("fn ran despite the canceled context")
	}
}

func TestTxnTooBig(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	value := bytes.Repeat([]byte("x"), 100<<10)
	err := s.Update(t.Context(), func(tx storage.Txn) error {
		for i := range 100 { // 10 MiB, well above the ~2.4 MiB batch limit
			if err := tx.Set(fmt.Appendf(nil, "big/%03d", i), value, 0); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, ErrTxnTooBig) || !errors.Is(err, badger.ErrTxnTooBig) {
		t.Fatalf("oversized Update = %v, want ErrTxnTooBig", err)
	}
	if err := s.View(t.Context(), func(tx storage.Txn) error {
		_, err := tx.Get([]byte("big/000"))
		return err
	}); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Get after failed oversized Update = %v, want storage.ErrNotFound", err)
	}
}

func TestTxnUnusableAfterFn(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	var kept storage.Txn
	if err := s.Update(t.Context(), func(tx storage.Txn) error { kept = tx; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := kept.Get([]byte("k")); err == nil || errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Get on an ended Txn = %v, want errTxnDone", err)
	}
	if err := kept.Iterate(nil, func(_, _ []byte) (bool, error) { return true, nil }); err == nil {
		t.Error("Iterate on an ended Txn returned nil, want an error")
	}
}

func TestSetRejectsNegativeTTL(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	if err := s.Update(t.Context(), func(tx storage.Txn) error {
		return tx.Set([]byte("k"), []byte("v"), -time.Second)
	}); err == nil {
		t.Error("Set with a negative ttl returned nil, want an error")
	}
}

func TestExpiresAtRoundsUp(t *testing.T) {
	base := time.Unix(1000, 0)
	for _, tc := range []struct {
		now  time.Time
		ttl  time.Duration
		want uint64
	}{
		{base, time.Second, 1001},
		{base.Add(time.Nanosecond), time.Second, 1002},
		{base.Add(999 * time.Millisecond), time.Second, 1002},
		{base, 1500 * time.Millisecond, 1002},
	} {
		if got := expiresAt(tc.now, tc.ttl); got != tc.want {
			t.Errorf("expiresAt(%v, %v) = %d, want %d", tc.now.UnixNano(), tc.ttl, got, tc.want)
		}
	}
}

// TestHotKeyMakesProgress widens each transaction's conflict window with a sleep so
// that optimistic retries alone would starve some Updates past maxAttempts; the
// exclusive fallback must let every one of them commit.
func TestHotKeyMakesProgress(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	const workers, perWorker = 16, 10
	var exclusive atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range perWorker {
				attempts := 0
				err := s.Update(t.Context(), func(tx storage.Txn) error {
					attempts++
					n := 0
					v, err := tx.Get([]byte("hot"))
					if err == nil {
						n, err = strconv.Atoi(string(v))
					}
					if err != nil && !errors.Is(err, storage.ErrNotFound) {
						return err
					}
					time.Sleep(2 * time.Millisecond)
					return tx.Set([]byte("hot"), []byte(strconv.Itoa(n+1)), 0)
				})
				if err != nil {
					t.Errorf("Update: %v", err)
					return
				}
				if attempts > optimisticAttempts+1 {
					t.Errorf("Update took %d attempts, want at most %d", attempts, optimisticAttempts+1)
				}
				if attempts > optimisticAttempts {
					exclusive.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if err := s.View(t.Context(), func(tx storage.Txn) error {
		v, err := tx.Get([]byte("hot"))
		if err == nil && string(v) != strconv.Itoa(workers*perWorker) {
			err = fmt.Errorf("hot = %s, want %d", v, workers*perWorker)
		}
		return err
	}); err != nil {
		t.Error(err)
	}
	t.Logf("%d of %d Updates needed the exclusive fallback", exclusive.Load(), workers*perWorker)
}

// TestPanicInUpdateReleasesLocks checks that a panicking fn (recovered by the caller,
// as net/http does) leaves the store usable, in optimistic and exclusive attempts.
func TestPanicInUpdateReleasesLocks(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	for _, exclusive := range []bool{false, true} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("exclusive=%v: no panic", exclusive)
				}
			}()
			_, _ = s.attempt(func(tx storage.Txn) error {
				if err := tx.Set([]byte("k"), []byte("v"), 0); err != nil {
					return err
				}
				panic("boom")
			}, exclusive)
		}()
	}
	done := make(chan error, 1)
	go func() {
		done <- s.Update(t.Context(), func(tx storage.Txn) error {
			if _, err := tx.Get([]byte("k")); !errors.Is(err, storage.ErrNotFound) {
				return fmt.Errorf("Get(k) after panicked Updates = %v, want ErrNotFound", err)
			}
			return tx.Set([]byte("k"), []byte("v"), 0)
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(30 * time.Second): // generous for a loaded machine
		t.Fatal("Update blocked after a panicking fn: lock not released")
	}
}

// TestBadgerLogsAtDebug checks that Badger's chatter reaches zap, named "badger",
// and that its info lines are demoted to debug.
func TestBadgerLogsAtDebug(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	s, err := Open(t.TempDir(), zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	named := 0
	for _, e := range logs.All() {
		if e.LoggerName == "badger" {
			named++
		}
		if e.Level == zapcore.InfoLevel {
			t.Errorf("Badger logged at info level: %q", e.Message)
		}
	}
	if named == 0 {
		t.Error("no log entry named \"badger\" from Open and Close")
	}
}

// TestGCLoopStops runs the value log GC loop with a short interval and checks that
// it runs (logging each round) and returns once stopGC is closed.
func TestGCLoopStops(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	core, logs := observer.New(zapcore.DebugLevel)
	g := &Store{db: s.db, dir: s.dir, log: zap.New(core), stopGC: make(chan struct{}), gcDone: make(chan struct{})}
	go g.runGC(5 * time.Millisecond)
	deadline := time.Now().Add(30 * time.Second) // generous for a loaded machine
	for logs.FilterMessage("badger value log GC done").Len() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("value log GC did not complete two rounds within 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(g.stopGC)
	select {
	case <-g.gcDone:
	case <-time.After(30 * time.Second):
		t.Fatal("GC loop did not stop")
	}
	if n := logs.FilterLevelExact(zapcore.WarnLevel).Len(); n > 0 {
		t.Errorf("GC logged %d warnings: %v", n, logs.FilterLevelExact(zapcore.WarnLevel).All())
	}
}

// BenchmarkSyncedUpdate measures one small synced commit: an Update that sets one
// 64-byte value under a fresh key, as a registration does. Update commits concurrent
// Updates together (group.go), so the rate depends on how many run at once; the
// sub-benchmarks run 1 and 16 goroutines per GOMAXPROCS.
func BenchmarkSyncedUpdate(b *testing.B) {
	for _, par := range []int{1, 16} {
		b.Run(fmt.Sprintf("parallelism=%d", par), func(b *testing.B) {
			s := open(b, b.TempDir())
			defer s.Close()
			value := bytes.Repeat([]byte("v"), 64)
			var seq atomic.Uint64
			b.SetParallelism(par)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					key := fmt.Appendf(nil, "bench/%016x", seq.Add(1))
					if err := s.Update(context.Background(), func(tx storage.Txn) error {
						return tx.Set(key, value, 0)
					}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
		})
	}
}
