package pgstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/pgtest"
	"github.com/palmgate/palmgate/storage"
)

// holdTurn starts an Update that keeps the group's turn (its first attempt runs
// in it) until the returned release is called, so that the Updates started
// meanwhile queue and then run as one group.
func holdTurn(t *testing.T, s *Store) (release func()) {
	t.Helper()
	started, free := make(chan struct{}), make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		done <- s.Update(context.Background(), func(tx storage.Txn) error {
			once.Do(func() { close(started) })
			<-free
			return tx.Set([]byte("hold"), []byte("x"), 0)
		})
	}()
	<-started
	return func() {
		close(free)
		if err := <-done; err != nil {
			t.Errorf("the Update holding the turn: %v", err)
		}
	}
}

// waitQueued waits until n Updates wait for a group.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.group.mu.Lock()
		q := len(s.group.queue)
		s.group.mu.Unlock()
		if q >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Updates queued after 10s, want %d", q, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// inGroup runs fns as one group (after an Update holding the turn) and returns
// their Update errors, and the values they panicked with.
func inGroup(t *testing.T, s *Store, fns ...func(storage.Txn) error) ([]error, []any) {
	t.Helper()
	release := holdTurn(t, s)
	errs, panics := make([]error, len(fns)), make([]any, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() {
			defer func() { panics[i] = recover() }()
			errs[i] = s.Update(context.Background(), fn)
		})
		waitQueued(t, s, i+1) // queued in this order
	}
	release()
	wg.Wait()
	return errs, panics
}

func get(t *testing.T, s *Store, key string) string {
	t.Helper()
	v, err := storage.ReadKey(context.Background(), s, []byte(key))
	if errors.Is(err, storage.ErrNotFound) {
		return "<none>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(v)
}

// increment adds one to the decimal counter under key.
func increment(tx storage.Txn, key string) error {
	v, err := tx.Get([]byte(key))
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	n, _ := strconv.Atoi(string(v))
	return tx.Set([]byte(key), []byte(strconv.Itoa(n+1)), 0)
}

// TestGroupOutcomes runs one group whose members do each thing a member can, and
// checks that every Update has the outcome it would have alone: the writers that
// meet no other commit in the group, the second increment of a key runs alone
// after the first, a member that iterates runs alone, a failed fn's error, a
// panic and a runtime.Goexit reach their callers.
func TestGroupOutcomes(t *testing.T) {
	s := closeT(t, openT(t, config(t, pgtest.DSN(t))))
	runs := make([]atomic.Int64, 7)
	errBoom := errors.New("boom")
	errs, panics := inGroup(t, s,
		func(tx storage.Txn) error { runs[0].Add(1); return increment(tx, "hot") },
		func(tx storage.Txn) error { runs[1].Add(1); return increment(tx, "hot") }, // meets the first: alone
		func(tx storage.Txn) error { runs[2].Add(1); return tx.Set([]byte("it/b"), []byte("b"), 0) },
		func(tx storage.Txn) error {
			runs[3].Add(1)
			var keys []string
			if err := tx.IterateKeys([]byte("it/"), func(k []byte) (bool, error) {
				keys = append(keys, string(k))
				return true, nil
			}); err != nil {
				return err
			}
			return tx.Set([]byte("seen"), []byte(strings.Join(keys, ",")), 0)
		},
		func(tx storage.Txn) error { runs[4].Add(1); tx.Get([]byte("hot")); return errBoom },
		func(tx storage.Txn) error { runs[5].Add(1); panic("member panic") },
		func(tx storage.Txn) error {
			runs[6].Add(1)
			tx.Set([]byte("goexit"), []byte("x"), 0)
			runtime.Goexit() // as t.FailNow does
			return nil
		},
	)
	for i, err := range errs[:4] {
		if err != nil {
			t.Errorf("member %d: %v", i, err)
		}
	}
	if !errors.Is(errs[4], errBoom) {
		t.Errorf("the failing member: %v, want its own error", errs[4])
	}
	if panics[5] != "member panic" {
		t.Errorf("the panicking member's caller recovered %v", panics[5])
	}
	if got := get(t, s, "hot"); got != "2" {
		t.Errorf("hot = %s after two increments", got)
	}
	if got := get(t, s, "goexit"); got != "<none>" {
		t.Errorf("the write of the member that called runtime.Goexit committed")
	}
	if got := get(t, s, "it/b"); got != "b" {
		t.Errorf("it/b = %s", got)
	}
	// Alone, after the group: it sees it/b either way, as one of the orders would.
	if got := get(t, s, "seen"); got != "it/b" {
		t.Errorf("the iterating member saw %q, want it/b", got)
	}
	for i, want := range []int64{1, 2, 1, 2, 1, 1, 1} {
		if got := runs[i].Load(); got != want {
			t.Errorf("member %d ran %d times, want %d", i, got, want)
		}
	}
	if st := s.Stats(); st.Grouped != 2 {
		t.Errorf("Stats.Grouped = %d, want 2 (the first increment and it/b)", st.Grouped)
	}
}

// TestGroupFailureRunsAlone: a group whose commit fails (one member's key is too
// long for the primary key's index) decides nothing; each member runs alone, the
// others commit and the faulty one meets its own error. The next group is smaller.
func TestGroupFailureRunsAlone(t *testing.T) {
	s := closeT(t, openT(t, config(t, pgtest.DSN(t))))
	long := make([]byte, 3000)
	rand.Read(long) // incompressible
	errs, _ := inGroup(t, s,
		func(tx storage.Txn) error { return tx.Set([]byte("ok/1"), []byte("1"), 0) },
		func(tx storage.Txn) error { return tx.Set(long, []byte("x"), 0) },
		func(tx storage.Txn) error { return tx.Set([]byte("ok/2"), []byte("2"), 0) },
	)
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("the sound members: %v, %v", errs[0], errs[2])
	}
	if errs[1] == nil || errors.Is(errs[1], storage.ErrUnavailable) {
		t.Errorf("the member with the long key: %v, want the server's refusal", errs[1])
	}
	if get(t, s, "ok/1") != "1" || get(t, s, "ok/2") != "2" {
		t.Error("the sound members' writes are missing")
	}
	if st := s.Stats(); st.Grouped != 0 {
		t.Errorf("Stats.Grouped = %d, want 0: the group failed", st.Grouped)
	}
	if got := s.groupLimit.Load(); got != maxGroupSize/2 {
		t.Errorf("group limit %d after a failed group, want %d", got, maxGroupSize/2)
	}
}

// TestGroupCommitLost: when the connection is lost while a group commits, its
// writers may have committed: each gets an error saying so and does not run
// again. A member that only read runs again alone.
func TestGroupCommitLost(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := closeT(t, openT(t, config(t, dsn)))
	admin := sqlConn(t, dsn)
	s.groupCommitHook = func(tx *txn) {
		s.groupCommitHook = nil
		pid := tx.conn.Conn().PgConn().PID()
		if _, err := admin.Exec(context.Background(), "SELECT pg_terminate_backend($1)", pid); err != nil {
			t.Error(err)
		}
	}
	var writes, reads atomic.Int64
	errs, _ := inGroup(t, s,
		func(tx storage.Txn) error { writes.Add(1); return tx.Set([]byte("w/1"), []byte("1"), 0) },
		func(tx storage.Txn) error { writes.Add(1); return tx.Set([]byte("w/2"), []byte("2"), 0) },
		func(tx storage.Txn) error { reads.Add(1); _, err := tx.Get([]byte("w/1")); return ignoreNotFound(err) },
	)
	for i, err := range errs[:2] {
		if !errors.Is(err, storage.ErrUnavailable) || !strings.Contains(fmt.Sprint(err), "may or may not have committed") {
			t.Errorf("writer %d: %v, want an unavailable error that may have committed", i, err)
		}
	}
	if writes.Load() != 2 {
		t.Errorf("the writers ran %d times, want once each", writes.Load())
	}
	if errs[2] != nil || reads.Load() != 2 {
		t.Errorf("the reader: %v after %d runs, want success on its second run", errs[2], reads.Load())
	}
}

func ignoreNotFound(err error) error {
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	return err
}

// TestGroupedLoad: many concurrent Updates, each incrementing a key of its own and
// every fourth a shared one, lose no increment; most of them commit in groups.
func TestGroupedLoad(t *testing.T) {
	s := closeT(t, openT(t, config(t, pgtest.DSN(t))))
	const workers, each = 32, 20
	var wg sync.WaitGroup
	var failed atomic.Int64
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				err := s.Update(t.Context(), func(tx storage.Txn) error {
					if err := increment(tx, fmt.Sprintf("own/%d", w)); err != nil {
						return err
					}
					if i%4 == 0 {
						return increment(tx, "shared")
					}
					return nil
				})
				if err != nil {
					failed.Add(1)
					t.Errorf("Update: %v", err)
				}
			}
		})
	}
	wg.Wait()
	for w := range workers {
		if got := get(t, s, fmt.Sprintf("own/%d", w)); got != strconv.Itoa(each) {
			t.Errorf("own/%d = %s, want %d", w, got, each)
		}
	}
	if got, want := get(t, s, "shared"), strconv.Itoa(workers*each/4); got != want {
		t.Errorf("shared = %s, want %s", got, want)
	}
	st := s.Stats()
	t.Logf("stats: %+v", st)
	if st.Grouped < workers*each/4 {
		t.Errorf("Stats.Grouped = %d: too few of the %d Updates ran in groups for the test to test them", st.Grouped, workers*each)
	}
}

// TestGroupCanceledWhileQueued: an Update whose context ends while it waits for a
// group returns the context's error at once and never runs.
func TestGroupCanceledWhileQueued(t *testing.T) {
	s := closeT(t, openT(t, config(t, pgtest.DSN(t))))
	release := holdTurn(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	var ran atomic.Bool
	done := make(chan error, 1)
	go func() {
		done <- s.Update(ctx, func(tx storage.Txn) error { ran.Store(true); return tx.Set([]byte("c"), nil, 0) })
	}()
	waitQueued(t, s, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) { // before the turn is released
		t.Errorf("Update = %v, want context.Canceled", err)
	}
	release()
	if ran.Load() {
		t.Error("the canceled Update ran")
	}
}

// TestGroupWriteSkew: two members that each write one key only when neither of
// two keys exists cannot both commit (one order of the two writes only one).
func TestGroupWriteSkew(t *testing.T) {
	s := closeT(t, openT(t, config(t, pgtest.DSN(t))))
	claim := func(mine string) func(storage.Txn) error {
		return func(tx storage.Txn) error {
			for _, k := range []string{"skew/a", "skew/b"} {
				if _, err := tx.Get([]byte(k)); !errors.Is(err, storage.ErrNotFound) {
					return err // taken (nil), or a failure
				}
			}
			return tx.Set([]byte(mine), []byte("x"), 0)
		}
	}
	errs, _ := inGroup(t, s, claim("skew/a"), claim("skew/b"))
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if a, b := get(t, s, "skew/a"), get(t, s, "skew/b"); a != "x" || b != "<none>" {
		t.Errorf("skew/a = %s, skew/b = %s; want only the first member's claim", a, b)
	}
}

// TestLonePanicEndsTurn: an Update whose fn panics while it runs alone in the
// group's turn panics in its caller and leaves the turn to the next Update.
func TestLonePanicEndsTurn(t *testing.T) {
	s := closeT(t, openT(t, config(t, pgtest.DSN(t))))
	func() {
		defer func() {
			if p := recover(); p != "alone" {
				t.Errorf("recovered %v, want the fn's panic", p)
			}
		}()
		s.Update(t.Context(), func(storage.Txn) error { panic("alone") })
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := s.Update(ctx, func(tx storage.Txn) error { return tx.Set([]byte("after"), []byte("x"), 0) }); err != nil {
		t.Errorf("the Update after the panic: %v", err)
	}
}

// endedCtx is a context whose Err turns non-nil when end is set, without its Done
// channel ever closing: a call taken into a group after its context ended.
type endedCtx struct {
	context.Context
	end atomic.Bool
}

func (c *endedCtx) Err() error {
	if c.end.Load() {
		return context.Canceled
	}
	return nil
}

// TestGroupLeaderEndedOtherPanics: when a group's leader's context has ended and
// one other call is left, that call runs in its own goroutine, so its panic is
// its caller's and not the leader's.
func TestGroupLeaderEndedOtherPanics(t *testing.T) {
	s := closeT(t, openT(t, config(t, pgtest.DSN(t))))
	release := holdTurn(t, s)
	leaderCtx := &endedCtx{Context: context.Background()}
	leader, other := make(chan any, 1), make(chan any, 1)
	var leaderErr error
	go func() {
		defer func() { leader <- recover() }()
		leaderErr = s.Update(leaderCtx, func(tx storage.Txn) error { return tx.Set([]byte("l"), nil, 0) })
	}()
	waitQueued(t, s, 1)
	go func() {
		defer func() { other <- recover() }()
		s.Update(context.Background(), func(storage.Txn) error { panic("other") })
	}()
	waitQueued(t, s, 2)
	leaderCtx.end.Store(true)
	release()
	if p := <-leader; p != nil {
		t.Errorf("the leader panicked with %v", p)
	} else if !errors.Is(leaderErr, context.Canceled) {
		t.Errorf("the leader's Update = %v, want context.Canceled", leaderErr)
	}
	if p := <-other; p != "other" {
		t.Errorf("the other call's caller recovered %v, want its fn's panic", p)
	}
}

// TestGroupCanceledInGroup: a member whose context ends while its group runs
// leaves the group: its Update returns the context's error, none of its writes
// commit (even when its fn ignores the errors and returns nil), it does not run
// again, and the other members commit.
func TestGroupCanceledInGroup(t *testing.T) {
	s := closeT(t, openT(t, config(t, pgtest.DSN(t))))
	release := holdTurn(t, s)
	ignoring, ignoringCancel := context.WithCancel(context.Background())
	reading, readingCancel := context.WithCancel(context.Background())
	defer ignoringCancel()
	defer readingCancel()
	var runs [3]atomic.Int64
	errs := make([]error, 3)
	var wg sync.WaitGroup
	calls := []struct {
		ctx context.Context
		fn  func(storage.Txn) error
	}{
		{ignoring, func(tx storage.Txn) error { // ends its context, ignores every error
			runs[0].Add(1)
			ignoringCancel()
			tx.Get([]byte("other"))
			tx.Set([]byte("ignoring"), []byte("x"), 0)
			return nil
		}},
		{reading, func(tx storage.Txn) error { // writes, then ends its context and reads
			runs[1].Add(1)
			if err := tx.Set([]byte("reading"), []byte("x"), 0); err != nil {
				return err
			}
			readingCancel()
			_, err := tx.Get([]byte("other"))
			return ignoreNotFound(err)
		}},
		{context.Background(), func(tx storage.Txn) error {
			runs[2].Add(1)
			return tx.Set([]byte("other"), []byte("x"), 0)
		}},
	}
	for i, c := range calls {
		wg.Go(func() { errs[i] = s.Update(c.ctx, c.fn) })
		waitQueued(t, s, i+1)
	}
	release()
	wg.Wait()
	for i := range 2 {
		if !errors.Is(errs[i], context.Canceled) {
			t.Errorf("member %d, whose context ended in the group: %v, want context.Canceled", i, errs[i])
		}
		if n := runs[i].Load(); n != 1 {
			t.Errorf("member %d ran %d times, want once", i, n)
		}
	}
	if errs[2] != nil {
		t.Errorf("the other member: %v", errs[2])
	}
	for key, want := range map[string]string{"ignoring": "<none>", "reading": "<none>", "other": "x"} {
		if got := get(t, s, key); got != want {
			t.Errorf("%s = %s, want %s", key, got, want)
		}
	}
	if st := s.Stats(); st.Groups != 1 {
		t.Errorf("Stats.Groups = %d, want 1", st.Groups)
	}
}

// TestNoGroupCommits: with Config.NoGroupCommits, concurrent Updates never share
// a transaction, and lose nothing.
func TestNoGroupCommits(t *testing.T) {
	cfg := config(t, pgtest.DSN(t))
	cfg.NoGroupCommits = true
	s := closeT(t, openT(t, cfg))
	const workers, each = 16, 10
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				err := s.Update(t.Context(), func(tx storage.Txn) error {
					if err := increment(tx, fmt.Sprintf("own/%d", w)); err != nil {
						return err
					}
					return increment(tx, "shared")
				})
				if err != nil {
					t.Errorf("Update: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if got, want := get(t, s, "shared"), strconv.Itoa(workers*each); got != want {
		t.Errorf("shared = %s, want %s", got, want)
	}
	if st := s.Stats(); st.Groups != 0 || st.Grouped != 0 {
		t.Errorf("Stats = %+v: Updates shared a transaction with grouped commits off", st)
	}
}
