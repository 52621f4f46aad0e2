package bounded

import (
	"context"
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/clocktest"
)

const (
	refresh = time.Second
	maxAge  = 2 * time.Second
	retry   = 250 * time.Millisecond
)

var errDown = errors.New("store down")

// fakeStore is the store a Value reads: a set of names, which the test changes
// directly as another instance would; it counts the reads and can fail them or
// hold them until released.
type fakeStore struct {
	mu      sync.Mutex
	names   map[string]bool
	down    bool
	hold    chan struct{} // non-nil: a read waits until it is closed
	entered chan struct{} // non-nil: a read sends on it once started

	loads atomic.Int64
}

func (s *fakeStore) set(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.names[name] = true
}

func (s *fakeStore) load(ctx context.Context) (map[string]bool, error) {
	s.loads.Add(1)
	s.mu.Lock()
	hold, entered := s.hold, s.entered
	s.mu.Unlock()
	if entered != nil {
		select { // the first read says so; the test waits for no other
		case entered <- struct{}{}:
		default:
		}
	}
	if hold != nil {
		<-hold
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return nil, errDown
	}
	return maps.Clone(s.names), nil
}

type harness struct {
	clock *clocktest.Clock
	store *fakeStore
	v     *Value[map[string]bool]
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{clock: clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), store: &fakeStore{names: map[string]bool{"a": true}}}
	h.v = New(Config[map[string]bool]{
		Load: h.store.load,
		// Nothing is ever removed: what this instance added stays until the store has it.
		Merge: func(held, loaded map[string]bool) map[string]bool {
			for k := range held {
				loaded[k] = true
			}
			return loaded
		},
		Now: h.clock.Now, Refresh: refresh, MaxAge: maxAge, Retry: retry,
	})
	return h
}

// has reports whether the Value's answer holds name, failing the test on an error.
func (h *harness) has(t *testing.T, name string) bool {
	t.Helper()
	got, err := h.v.Get(t.Context())
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return got[name]
}

// settle waits for a background read to end.
func (h *harness) settle() {
	for h.v.Refreshing() {
		time.Sleep(time.Millisecond)
	}
}

func add(name string) func(map[string]bool) map[string]bool {
	return func(m map[string]bool) map[string]bool {
		m = maps.Clone(m)
		if m == nil {
			m = map[string]bool{}
		}
		m[name] = true
		return m
	}
}

// TestFreshAnswer: the first Get reads; within Refresh of that read every Get is
// answered from memory, with no read, even after the store changed.
func TestFreshAnswer(t *testing.T) {
	h := newHarness(t)
	if h.v.Read() {
		t.Fatal("Read before any Get")
	}
	if !h.has(t, "a") {
		t.Fatal("first Get: a missing")
	}
	if n := h.store.loads.Load(); n != 1 || !h.v.Read() {
		t.Fatalf("first Get: %d reads, Read %v; want 1, true", n, h.v.Read())
	}
	h.store.set("b")
	h.clock.Advance(refresh - time.Nanosecond)
	for range 3 {
		if h.has(t, "b") {
			t.Fatal("within Refresh: answered b, which only a read could show")
		}
	}
	h.settle()
	if n := h.store.loads.Load(); n != 1 {
		t.Errorf("within Refresh: %d reads, want 1", n)
	}
}

// TestBackgroundRefresh: from Refresh on, a Get answers the held value at once,
// without waiting for the store, and starts one read in the background whose
// result the next Gets answer.
func TestBackgroundRefresh(t *testing.T) {
	h := newHarness(t)
	h.has(t, "a")
	h.store.set("b")
	hold := make(chan struct{})
	h.store.hold = hold
	h.clock.Advance(refresh)
	for range 3 { // the read is held: these answer without it
		if h.has(t, "b") {
			t.Fatal("a Get during the background read answered its result")
		}
	}
	if !h.v.Refreshing() {
		t.Fatal("no background read started at Refresh")
	}
	close(hold)
	h.settle()
	if n := h.store.loads.Load(); n != 2 {
		t.Errorf("%d reads, want 2 (the first, one background read)", n)
	}
	if !h.has(t, "b") {
		t.Error("after the background read: b missing")
	}
	// The background read restarted the clock of the value's age.
	h.clock.Advance(maxAge - refresh)
	h.store.down = true
	if !h.has(t, "b") {
		t.Error("b missing")
	}
	h.settle()
}

// TestForegroundPastMaxAge: a Get on a value whose read started MaxAge ago (or
// later than now: the clock went back) reads the store before it answers.
func TestForegroundPastMaxAge(t *testing.T) {
	h := newHarness(t)
	h.has(t, "a")
	h.store.set("b")
	h.clock.Advance(maxAge)
	if !h.has(t, "b") {
		t.Fatal("past MaxAge: answered without reading the store")
	}
	if n := h.store.loads.Load(); n != 2 {
		t.Errorf("%d reads, want 2", n)
	}
	h.store.set("c")
	h.clock.Advance(-time.Second)
	if !h.has(t, "c") {
		t.Fatal("clock gone back: answered without reading the store")
	}
}

// TestFailureRemembered: a failed foreground read is answered to every Get for
// Retry, with no other read; then the store is tried again. A Get whose own
// context is cancelled fails alone.
func TestFailureRemembered(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	h.has(t, "a")
	h.store.mu.Lock()
	h.store.down = true
	h.store.mu.Unlock()
	h.clock.Advance(maxAge)
	before := h.store.loads.Load()
	for i := range 3 {
		if _, err := h.v.Get(ctx); !errors.Is(err, errDown) {
			t.Fatalf("Get %d with the store down = %v, want %v", i, err, errDown)
		}
		h.clock.Advance(retry / 3)
	}
	if n := h.store.loads.Load() - before; n != 1 {
		t.Errorf("3 Gets within Retry made %d reads, want 1", n)
	}
	h.clock.Advance(retry - 3*(retry/3)) // Retry after the failure: tried again
	if _, err := h.v.Get(ctx); !errors.Is(err, errDown) {
		t.Fatalf("Get after Retry = %v, want %v", err, errDown)
	}
	if n := h.store.loads.Load() - before; n != 2 {
		t.Errorf("after Retry: %d reads, want 2", n)
	}
	h.store.mu.Lock()
	h.store.down = false
	h.store.mu.Unlock()
	h.clock.Advance(retry)
	if !h.has(t, "a") {
		t.Error("store back: a missing")
	}

	// A cancelled Get's failure is not answered to the next one.
	h.clock.Advance(maxAge)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := h.v.Get(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Get = %v, want context.Canceled", err)
	}
	if !h.has(t, "a") {
		t.Error("after a cancelled Get: a missing")
	}
}

// TestConcurrentCallersOneRead: Gets that all find the value past MaxAge at once
// wait for one read and answer its result.
func TestConcurrentCallersOneRead(t *testing.T) {
	h := newHarness(t)
	h.has(t, "a")
	h.store.set("b")
	h.clock.Advance(maxAge)
	hold, entered := make(chan struct{}), make(chan struct{}, 1)
	h.store.hold, h.store.entered = hold, entered
	// Count the clock's reads: a Get reads it once before it waits for the read
	// under way, the one making that read three times before it reads the store.
	var nows atomic.Int64
	h.v.cfg.Now = func() time.Time { nows.Add(1); return h.clock.Now() }
	const callers = 8
	var wg sync.WaitGroup
	var wrong atomic.Int64
	for range callers {
		wg.Go(func() {
			if got, err := h.v.Get(context.Background()); err != nil || !got["b"] {
				wrong.Add(1)
			}
		})
	}
	<-entered                     // one read under way
	for nows.Load() < callers+2 { // every other caller is at the lock it waits on
		time.Sleep(time.Millisecond)
	}
	close(hold)
	wg.Wait()
	if n := h.store.loads.Load(); n != 2 {
		t.Errorf("%d concurrent Gets past MaxAge made %d reads, want 1", callers, n-1)
	}
	if n := wrong.Load(); n != 0 {
		t.Errorf("%d Gets did not answer the read's result", n)
	}
}

// TestOwnChangeAtOnce: an Update is answered by the next Get with no read, and
// survives a read that started before it (the store did not have it yet).
func TestOwnChangeAtOnce(t *testing.T) {
	h := newHarness(t)
	h.has(t, "a")
	h.v.Update(add("mine"))
	if !h.has(t, "mine") {
		t.Fatal("own change not answered at once")
	}
	if n := h.store.loads.Load(); n != 1 {
		t.Errorf("%d reads, want 1", n)
	}

	hold, entered := make(chan struct{}), make(chan struct{}, 1)
	h.store.hold, h.store.entered = hold, entered
	h.clock.Advance(refresh)
	h.has(t, "a") // starts a background read, held
	<-entered
	h.v.Update(add("during"))
	close(hold)
	h.settle()
	if n := h.store.loads.Load(); n != 2 {
		t.Fatalf("%d reads, want 2", n)
	}
	if !h.has(t, "during") || !h.has(t, "mine") {
		t.Error("a read that started before an own change dropped it")
	}
}

// TestChangeElsewhereWithinMaxAge: a change written to the store directly, as
// another instance does, is answered within MaxAge of the last read, Gets coming
// every 100 ms, and at MaxAge even when no background read ran.
func TestChangeElsewhereWithinMaxAge(t *testing.T) {
	h := newHarness(t)
	h.has(t, "a")
	h.store.set("b")
	for age := time.Duration(0); age < maxAge; age += 100 * time.Millisecond {
		h.has(t, "a")
		h.settle()
		h.clock.Advance(100 * time.Millisecond)
	}
	if !h.has(t, "b") {
		t.Error("with Gets every 100 ms: the change is not answered MaxAge after it")
	}

	// No Get between Refresh and MaxAge, hence no background read: a Get at
	// MaxAge reads.
	h.store.set("c")
	h.clock.Advance(maxAge)
	if !h.has(t, "c") {
		t.Error("no Get until MaxAge: the change is not answered at MaxAge")
	}
}
