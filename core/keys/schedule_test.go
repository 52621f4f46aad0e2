package keys

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/clocktest"
	"github.com/palmgate/palmgate/storage/memstore"
	"github.com/palmgate/palmgate/storage/storagetest"
)

// TestRotateIfDue: nothing before the active key is `every` old (no key stored),
// a new active key once it is, then nothing again until the new one is as old.
func TestRotateIfDue(t *testing.T) {
	ctx := context.Background()
	const every = 30 * 24 * time.Hour
	clock := clocktest.New(testNow)
	store := memstore.New()
	s := openClocked(t, store, clock)
	first := s.Active(ES256)

	clock.Advance(every - time.Second)
	if k, err := s.RotateIfDue(ctx, ES256, every); err != nil || k != nil {
		t.Fatalf("RotateIfDue a second early = %v, %v; want nothing", k, err)
	}
	if n := len(storedKeys(t, store, ES256)); n != 1 {
		t.Errorf("%d ES256 keys stored, want 1", n)
	}

	clock.Advance(time.Second)
	k, err := s.RotateIfDue(ctx, ES256, every)
	if err != nil || k == nil {
		t.Fatalf("RotateIfDue when due = %v, %v; want a new key", k, err)
	}
	if a := s.Active(ES256); a.ID != k.ID || !a.Created.Equal(clock.Now()) {
		t.Errorf("active key = %s created %v, want %s created now", a.ID, a.Created, k.ID)
	}
	if old := s.ByID(first.ID); old == nil || old.Active || !old.Retired.Equal(clock.Now()) {
		t.Errorf("the previous key = %+v, want retired now", old)
	}
	if got := s.Active(RS256); !got.Created.Equal(testNow) {
		t.Error("rotating ES256 rotated RS256")
	}

	clock.Advance(every / 2)
	if k, err := s.RotateIfDue(ctx, ES256, every); err != nil || k != nil {
		t.Errorf("RotateIfDue half an interval later = %v, %v; want nothing", k, err)
	}
	if _, err := s.RotateIfDue(ctx, ES256, 0); err == nil {
		t.Error("RotateIfDue with a zero interval succeeded")
	}
	if n := len(storedKeys(t, store, ES256)); n != 2 {
		t.Errorf("%d ES256 keys stored, want 2", n)
	}
}

// TestMaintain: a round rotates every algorithm that is due (and only those), and
// drops the retired keys past their drop time; with no interval it only drops.
func TestMaintain(t *testing.T) {
	ctx := context.Background()
	const every = time.Hour
	clock := clocktest.New(testNow)
	store := memstore.New()
	s := openClocked(t, store, clock)
	before := map[string]string{}
	for _, alg := range Algorithms {
		before[alg] = s.Active(alg).ID
	}

	if rep, err := s.Maintain(ctx, every); err != nil || len(rep.Rotated)+len(rep.Dropped) != 0 {
		t.Fatalf("Maintain with nothing due = %+v, %v", rep, err)
	}
	// Make EdDSA younger than the others: it is not due with them.
	clock.Advance(10 * time.Minute)
	if _, err := s.Rotate(ctx, EdDSA); err != nil {
		t.Fatal(err)
	}
	clock.Advance(every - 10*time.Minute)
	rep, err := s.Maintain(ctx, every)
	if err != nil {
		t.Fatalf("Maintain: %v", err)
	}
	var rotated []string
	for _, k := range rep.Rotated {
		rotated = append(rotated, k.Algorithm)
		if s.Active(k.Algorithm).ID != k.ID {
			t.Errorf("the %s key rotated in is not the active one", k.Algorithm)
		}
	}
	if len(rotated) != 2 || rotated[0] != RS256 || rotated[1] != ES256 {
		t.Errorf("rotated %v, want [RS256 ES256] (EdDSA is 50 minutes old)", rotated)
	}

	// Past the drop of the first EdDSA key (retired 10 minutes in, 1h lifetime),
	// before that of the others (retired at 1h): only it is dropped.
	clock.Set(testNow.Add(10*time.Minute + testLifetimes[EdDSA] + RetireMargin))
	rep, err = s.Maintain(ctx, 0)
	if err != nil || len(rep.Rotated) != 0 || len(rep.Dropped) != 1 || rep.Dropped[0].ID != before[EdDSA] {
		t.Fatalf("Maintain(0) = %+v, %v; want the first EdDSA key dropped and nothing rotated", rep, err)
	}
	if n := len(storedKeys(t, store, EdDSA)); n != 1 {
		t.Errorf("%d EdDSA keys stored, want 1", n)
	}
	if s.ByID(before[RS256]) == nil || s.ByID(before[ES256]) == nil {
		t.Error("the RS256 or ES256 key retired at 1h was dropped early")
	}
}

// TestScheduledRotationOnceAcrossInstances: two instances on one store find the
// keys due at the same moment and rotate at once, their transactions overlapping
// (occStore runs them as two processes' would, interleavingStore holds both until
// both read the store): exactly one new key per algorithm is stored, and both
// instances end up signing with it.
func TestScheduledRotationOnceAcrossInstances(t *testing.T) {
	const every = 720 * time.Hour
	for _, alg := range Algorithms {
		t.Run(alg, func(t *testing.T) {
			ctx := context.Background()
			clock := clocktest.New(testNow)
			store := newOCCStore()
			a, b := openClocked(t, store, clock), openClocked(t, store, clock)
			old := a.Active(alg).ID
			clock.Advance(every)

			racing := &interleavingStore{Store: store, n: 2, release: make(chan struct{})}
			a.store, b.store = racing, racing
			sets := []*Set{a, b}
			got := make([]*Key, 2)
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for i, s := range sets {
				wg.Go(func() { got[i], errs[i] = s.RotateIfDue(ctx, alg, every) })
			}
			wg.Wait()
			if !racing.overlapped() {
				t.Fatal("the two rotations did not overlap: the test proves nothing")
			}
			var winners []*Key
			for i := range sets {
				if errs[i] != nil {
					t.Fatalf("instance %d: RotateIfDue: %v", i, errs[i])
				}
				if got[i] != nil {
					winners = append(winners, got[i])
				}
			}
			if len(winners) != 1 {
				t.Fatalf("%d instances rotated, want exactly 1", len(winners))
			}
			if n := len(storedKeys(t, store, alg)); n != 2 {
				t.Errorf("%d %s keys stored, want 2 (the retired one and one new)", n, alg)
			}
			assertAgree(t, store, sets)
			for i, s := range sets {
				if s.Active(alg).ID != winners[0].ID {
					t.Errorf("instance %d signs with %s, want the new key %s", i, s.Active(alg).ID, winners[0].ID)
				}
				if k := s.ByID(old); k == nil || k.Active {
					t.Errorf("instance %d: the old key = %+v, want it retired and published", i, k)
				}
			}
		})
	}
}

// TestScheduledRotationOnceManyInstances: eight instances on one Badger store run
// a maintenance round at once when the keys are due: one rotation per algorithm.
func TestScheduledRotationOnceManyInstances(t *testing.T) {
	const every = time.Hour
	clock := clocktest.New(testNow)
	store := openStore(t, t.TempDir())
	sets := make([]*Set, 8)
	for i := range sets {
		sets[i] = openClocked(t, store, clock)
	}
	clock.Advance(every)
	reports := make([]Report, len(sets))
	errs := make([]error, len(sets))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, s := range sets {
		wg.Go(func() {
			<-start
			reports[i], errs[i] = s.Maintain(context.Background(), every)
		})
	}
	close(start)
	wg.Wait()
	rotations := map[string]int{}
	for i := range sets {
		if errs[i] != nil {
			t.Fatalf("instance %d: Maintain: %v", i, errs[i])
		}
		for _, k := range reports[i].Rotated {
			rotations[k.Algorithm]++
		}
	}
	for _, alg := range Algorithms {
		if rotations[alg] != 1 {
			t.Errorf("%s rotated %d times, want once", alg, rotations[alg])
		}
		if n := len(storedKeys(t, store, alg)); n != 2 {
			t.Errorf("%d %s keys stored, want 2", n, alg)
		}
	}
	for _, s := range sets {
		if err := s.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	assertAgree(t, store, sets)
}

// TestSchedule: the loop rotates once the clock says the keys are due, reports it,
// and returns when its context ends.
func TestSchedule(t *testing.T) {
	const every = time.Hour
	clock := clocktest.New(testNow)
	s := openClocked(t, memstore.New(), clock)
	reports := make(chan Report, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Schedule(ctx, every, time.Millisecond, func(r Report, err error) {
			if err != nil {
				t.Errorf("Schedule reported %v", err)
			}
			reports <- r
		})
	}()
	clock.Advance(every)
	select {
	case r := <-reports:
		if len(r.Rotated) != len(Algorithms) {
			t.Errorf("the round rotated %d keys, want %d", len(r.Rotated), len(Algorithms))
		}
	case <-time.After(30 * time.Second): // a bound for a loaded machine; done at the first round
		t.Fatal("no rotation reported within 30s of the keys being due")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Schedule did not return after its context ended")
	}
	if len(reports) != 0 {
		t.Errorf("%d more rounds reported with nothing due", len(reports))
	}
}

// TestMaintainStoreDown: a round while the store is down fails, reports the error,
// changes nothing and keeps the loaded keys; the next round once it is back does
// the work.
func TestMaintainStoreDown(t *testing.T) {
	ctx := context.Background()
	const every = time.Hour
	clock := clocktest.New(testNow)
	store := &storagetest.DownStore{Store: memstore.New()}
	s := openClocked(t, store, clock)
	before := s.Active(ES256).ID
	clock.Advance(every)
	store.Down.Store(true)
	rep, err := s.Maintain(ctx, every)
	if !errors.Is(err, storagetest.ErrDown) || len(rep.Rotated)+len(rep.Dropped) != 0 {
		t.Fatalf("Maintain with the store down = %+v, %v; want the store's error, nothing done", rep, err)
	}
	if k := s.Active(ES256); k == nil || k.ID != before {
		t.Fatalf("after the failed round the active key is %v, want %s still", k, before)
	}
	store.Down.Store(false)
	rep, err = s.Maintain(ctx, every)
	if err != nil || len(rep.Rotated) != len(Algorithms) {
		t.Fatalf("Maintain once the store is back = %+v, %v; want every algorithm rotated", rep, err)
	}
}
