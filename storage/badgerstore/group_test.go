package badgerstore

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/palmgate/palmgate/storage"
)

// holdGroup starts an Update whose fn blocks until the returned release is called,
// so that Updates started meanwhile queue for the next group. It waits until the
// blocking fn runs. wait returns once that Update has returned.
func holdGroup(t *testing.T, s *Store) (release func(), wait func()) {
	t.Helper()
	running, unblock := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.Update(t.Context(), func(tx storage.Txn) error {
			close(running)
			<-unblock
			return tx.Set([]byte("leader"), []byte("1"), 0)
		})
	}()
	<-running
	return func() { close(unblock) }, func() {
		if err := <-done; err != nil {
			t.Errorf("leader's Update: %v", err)
		}
	}
}

// waitQueued waits until n Updates wait in the group queue.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.group.mu.Lock()
		queued := len(s.group.queue)
		s.group.mu.Unlock()
		if queued >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Updates queued after 5s, want %d", queued, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// versions returns the commit timestamp of each key (0 when missing).
func versions(t *testing.T, s *Store, keys ...string) map[string]uint64 {
	t.Helper()
	out := make(map[string]uint64, len(keys))
	err := s.db.View(func(txn *badger.Txn) error {
		for _, k := range keys {
			item, err := txn.Get([]byte(k))
			if errors.Is(err, badger.ErrKeyNotFound) {
				out[k] = 0
				continue
			}
			if err != nil {
				return err
			}
			out[k] = item.Version()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGroupCommitsQueuedUpdatesTogether checks that Updates arriving while a group
// runs are committed in one transaction (one commit timestamp), after it.
func TestGroupCommitsQueuedUpdatesTogether(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	release, waitLeader := holdGroup(t, s)
	const n = 20
	keys := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		keys[i] = "k" + strconv.Itoa(i)
		wg.Go(func() {
			if err := s.Update(t.Context(), func(tx storage.Txn) error {
				return tx.Set([]byte(keys[i]), []byte("v"), 0)
			}); err != nil {
				t.Errorf("Update %d: %v", i, err)
			}
		})
	}
	waitQueued(t, s, n)
	release()
	waitLeader()
	wg.Wait()
	v := versions(t, s, append(keys, "leader")...)
	for _, k := range keys {
		if v[k] == 0 || v[k] != v[keys[0]] {
			t.Fatalf("commit timestamps %v: want the %d queued Updates in one commit", v, n)
		}
	}
	if v["leader"] == 0 || v["leader"] >= v[keys[0]] {
		t.Errorf("leader committed at %d, the group at %d: want the leader first", v["leader"], v[keys[0]])
	}
}

// TestGroupSerialSemantics checks that each fn of a group sees the writes of the
// ones before it: concurrent increments of one counter lose none.
func TestGroupSerialSemantics(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	release, waitLeader := holdGroup(t, s)
	const n = 30
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if err := s.Update(t.Context(), func(tx storage.Txn) error {
				count := 0
				v, err := tx.Get([]byte("counter"))
				if err == nil {
					count, err = strconv.Atoi(string(v))
				}
				if err != nil && !errors.Is(err, storage.ErrNotFound) {
					return err
				}
				return tx.Set([]byte("counter"), []byte(strconv.Itoa(count+1)), 0)
			}); err != nil {
				t.Errorf("Update: %v", err)
			}
		})
	}
	waitQueued(t, s, n)
	release()
	waitLeader()
	wg.Wait()
	wantValue(t, s, "counter", strconv.Itoa(n))
}

// TestGroupFailingFnLeavesNoWrite checks that a fn failing in a group returns its
// own error, commits none of its writes, and does not fail the others, which
// still commit together.
func TestGroupFailingFnLeavesNoWrite(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	release, waitLeader := holdGroup(t, s)
	errBoom := errors.New("boom")
	var mu sync.Mutex
	runs := map[string]int{}
	update := func(key string, fail bool) error {
		return s.Update(t.Context(), func(tx storage.Txn) error {
			mu.Lock()
			runs[key]++
			mu.Unlock()
			if err := tx.Set([]byte(key), []byte("v"), 0); err != nil {
				return err
			}
			if fail {
				return errBoom
			}
			return nil
		})
	}
	errs := make(map[string]error)
	var wg sync.WaitGroup
	for _, k := range []string{"a", "b-fails", "c", "d"} {
		wg.Go(func() {
			err := update(k, k == "b-fails")
			mu.Lock()
			errs[k] = err
			mu.Unlock()
		})
	}
	waitQueued(t, s, 4)
	release()
	waitLeader()
	wg.Wait()
	if !errors.Is(errs["b-fails"], errBoom) {
		t.Errorf("failing Update returned %v, want its fn's error", errs["b-fails"])
	}
	for _, k := range []string{"a", "c", "d"} {
		if errs[k] != nil {
			t.Errorf("Update %s: %v", k, errs[k])
		}
	}
	v := versions(t, s, "a", "b-fails", "c", "d")
	if v["b-fails"] != 0 {
		t.Error("the failing fn's write was committed")
	}
	if v["a"] == 0 || v["a"] != v["c"] || v["a"] != v["d"] {
		t.Errorf("commit timestamps %v: want a, c and d in one commit", v)
	}
	// In the group, then again without it, then alone, where its error stands.
	if runs["b-fails"] < 2 {
		t.Errorf("failing fn ran %d times, want it run again alone", runs["b-fails"])
	}
}

// TestGroupPanicRunsOthersAlone checks that a fn panicking in a group (on the
// leader's goroutine) panics in its own caller's goroutine, where net/http would
// recover it, and that the rest of the group still commits.
func TestGroupPanicRunsOthersAlone(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	release, waitLeader := holdGroup(t, s)
	panicked := make(chan any, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer func() { panicked <- recover() }()
		_ = s.Update(t.Context(), func(tx storage.Txn) error {
			if err := tx.Set([]byte("p"), []byte("v"), 0); err != nil {
				return err
			}
			panic("boom")
		})
	})
	waitQueued(t, s, 1)
	var err error
	wg.Go(func() {
		err = s.Update(t.Context(), func(tx storage.Txn) error { return tx.Set([]byte("x"), []byte("v"), 0) })
	})
	waitQueued(t, s, 2)
	release()
	waitLeader()
	wg.Wait()
	if p := <-panicked; p != "boom" {
		t.Errorf("panicking Update's caller recovered %v, want boom", p)
	}
	if err != nil {
		t.Errorf("the other Update: %v", err)
	}
	v := versions(t, s, "p", "x")
	if v["p"] != 0 || v["x"] == 0 {
		t.Errorf("commit timestamps %v: want x committed and p not", v)
	}
	// The store is still usable, and groups still form.
	if err := s.Update(t.Context(), func(tx storage.Txn) error { return tx.Set([]byte("y"), []byte("v"), 0) }); err != nil {
		t.Errorf("Update after a panic in a group: %v", err)
	}
}

// TestGroupCanceledWhileQueued checks that an Update whose context ends while it
// waits in the queue returns the context's error and writes nothing.
func TestGroupCanceledWhileQueued(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	release, waitLeader := holdGroup(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- s.Update(ctx, func(tx storage.Txn) error { return tx.Set([]byte("c"), []byte("v"), 0) })
	}()
	waitQueued(t, s, 1)
	cancel()
	release()
	waitLeader()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Update = %v, want context.Canceled", err)
	}
	if v := versions(t, s, "c"); v["c"] != 0 {
		t.Error("a canceled Update's write was committed")
	}
}

// TestGroupConflictRunsMembersAlone checks that when a group's commit conflicts
// with a concurrent transaction, every member runs again on its own, sees the
// other transaction's write, and commits.
func TestGroupConflictRunsMembersAlone(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	release, waitLeader := holdGroup(t, s)
	var mu sync.Mutex
	runs := map[string]int{}
	seen := map[string]string{}
	update := func(name string, interfere bool) error {
		return s.Update(t.Context(), func(tx storage.Txn) error {
			mu.Lock()
			runs[name]++
			first := runs[name] == 1
			mu.Unlock()
			v, err := tx.Get([]byte("k"))
			if err != nil && !errors.Is(err, storage.ErrNotFound) {
				return err
			}
			if interfere && first {
				// Another writer commits k after this group read it.
				if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("k"), []byte("other")) }); err != nil {
					return err
				}
			}
			mu.Lock()
			seen[name] = string(v)
			mu.Unlock()
			return tx.Set([]byte(name), v, 0)
		})
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Go(func() { errs[0] = update("a", true) })
	waitQueued(t, s, 1)
	wg.Go(func() { errs[1] = update("b", false) })
	waitQueued(t, s, 2)
	release()
	waitLeader()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Update %d: %v", i, err)
		}
	}
	for _, name := range []string{"a", "b"} {
		if runs[name] != 2 {
			t.Errorf("%s ran %d times, want 2 (in the group, then alone)", name, runs[name])
		}
		if seen[name] != "other" {
			t.Errorf("%s's last run read k = %q, want the other writer's %q", name, seen[name], "other")
		}
	}
}
