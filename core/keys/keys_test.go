package keys

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/palmgate/palmgate/internal/clocktest"
	"github.com/palmgate/palmgate/internal/keystest"
	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/badgerstore"
)

var testNow = time.Date(2026, 11, 21, 20, 0, 0, 0, time.UTC)

// fixedClock shows testNow: no test here moves time.
var fixedClock = clocktest.New(testNow).Now

// testKeys makes the Sets of the tests generate their RSA keys from
// internal/keystest's fixed set (a fresh 2048-bit key costs up to seconds on a
// loaded machine); TestOpenGeneratesAndPersists checks real generation once.
var testKeys = WithGenerator(keystest.Generator)

// openStore opens a Badger store in dir, closed at the end of the test unless the
// test closes it first.
func openStore(t *testing.T, dir string) storage.Store {
	t.Helper()
	store, err := badgerstore.Open(dir, zap.NewNop())
	if err != nil {
		t.Fatalf("badgerstore.Open: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

func openSet(t *testing.T, store storage.Store) *Set {
	t.Helper()
	s, err := Open(context.Background(), store, fixedClock, testKeys)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// storedKeys reads the key records of alg as the store holds them.
func storedKeys(t *testing.T, store storage.Store, alg string) []record {
	t.Helper()
	var out []record
	err := store.View(context.Background(), func(txn storage.Txn) error {
		return txn.Iterate(keyPrefix(alg), func(key, value []byte) (bool, error) {
			var r record
			if err := json.Unmarshal(value, &r); err != nil {
				return false, err
			}
			if string(key) != string(keyKey(alg, r.ID)) {
				t.Errorf("record %s is stored under %q", r.ID, key)
			}
			out = append(out, r)
			return true, nil
		})
	})
	if err != nil {
		t.Fatalf("reading stored keys: %v", err)
	}
	return out
}

// storedActive returns the kids of the stored records of alg marked active.
func storedActive(t *testing.T, store storage.Store, alg string) []string {
	t.Helper()
	var kids []string
	for _, r := range storedKeys(t, store, alg) {
		if r.Active {
			kids = append(kids, r.ID)
		}
	}
	return kids
}

var algorithms = []struct {
	alg   string
	check func(t *testing.T, k crypto.Signer)
}{
	{RS256, func(t *testing.T, k crypto.Signer) {
		rk, ok := k.(*rsa.PrivateKey)
		if !ok {
			t.Fatalf("RS256 key is %T, want *rsa.PrivateKey", k)
		}
		if got := rk.N.BitLen(); got != rsaBits {
			t.Errorf("RSA modulus is %d bits, want %d", got, rsaBits)
		}
	}},
	{ES256, func(t *testing.T, k crypto.Signer) {
		ek, ok := k.(*ecdsa.PrivateKey)
		if !ok {
			t.Fatalf("ES256 key is %T, want *ecdsa.PrivateKey", k)
		}
		if ek.Curve != elliptic.P256() {
			t.Errorf("ES256 key is on %s, want P-256", ek.Curve.Params().Name)
		}
	}},
	{EdDSA, func(t *testing.T, k crypto.Signer) {
		if ek, ok := k.(ed25519.PrivateKey); !ok || len(ek) != ed25519.PrivateKeySize {
			t.Fatalf("EdDSA key is %T, want an ed25519.PrivateKey", k)
		}
	}},
}

func TestOpenGeneratesAndPersists(t *testing.T) {
	dir := t.TempDir()
	store := openStore(t, dir)
	first, err := Open(context.Background(), store, fixedClock) // crypto/rand's keys
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	firstKIDs := map[string]string{}
	for _, tc := range algorithms {
		t.Run("fresh "+tc.alg, func(t *testing.T) {
			k := first.Active(tc.alg)
			if k == nil {
				t.Fatalf("no active %s key", tc.alg)
			}
			tc.check(t, k.Private)
			if k.Algorithm != tc.alg || !k.Active || !k.Created.Equal(testNow) || k.ID == "" {
				t.Errorf("key = {ID:%q Algorithm:%q Active:%v Created:%v}", k.ID, k.Algorithm, k.Active, k.Created)
			}
			if k.Method().Alg() != tc.alg {
				t.Errorf("Method = %s, want %s", k.Method().Alg(), tc.alg)
			}
			if first.ByID(k.ID) != k {
				t.Errorf("ByID(%s) is not the active key", k.ID)
			}
			if got := storedActive(t, store, tc.alg); len(got) != 1 || got[0] != k.ID {
				t.Errorf("stored active %s keys = %v, want [%s]", tc.alg, got, k.ID)
			}
			if n := len(storedKeys(t, store, tc.alg)); n != 1 {
				t.Errorf("%d %s keys stored, want 1", n, tc.alg)
			}
			firstKIDs[tc.alg] = k.ID
		})
	}
	if a, b, c := first.Active(RS256).ID, first.Active(ES256).ID, first.Active(EdDSA).ID; a == b || b == c || a == c {
		t.Error("two algorithms' keys share a kid")
	}
	if got := len(first.JWKS()); got != 3 {
		t.Errorf("JWKS has %d keys, want 3 (RS256, ES256, EdDSA)", got)
	}

	// Open again on the same store, then on the reopened directory: nothing new is
	// generated and the same keys come back.
	again := openSet(t, store)
	if err := store.Close(); err != nil {
		t.Fatalf("closing store: %v", err)
	}
	reopenedStore := openStore(t, dir)
	reopened := openSet(t, reopenedStore)
	for name, s := range map[string]*Set{"same store": again, "reopened directory": reopened} {
		for _, tc := range algorithms {
			t.Run(name+" "+tc.alg, func(t *testing.T) {
				k := s.Active(tc.alg)
				if k == nil || k.ID != firstKIDs[tc.alg] {
					t.Fatalf("active %s key = %v, want kid %s", tc.alg, k, firstKIDs[tc.alg])
				}
				tc.check(t, k.Private)
				if !k.Created.Equal(testNow) {
					t.Errorf("Created = %v, want %v", k.Created, testNow)
				}
				orig := first.Active(tc.alg)
				if !k.Private.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(orig.Public()) {
					t.Error("the reloaded key differs from the generated one")
				}
			})
		}
	}
	for _, tc := range algorithms {
		if n := len(storedKeys(t, reopenedStore, tc.alg)); n != 1 {
			t.Errorf("after reopening, %d %s keys stored, want 1", n, tc.alg)
		}
	}
}

func TestOpenRace(t *testing.T) {
	tests := []struct {
		name      string
		instances int
	}{
		{"two instances", 2},
		{"eight instances", 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := openStore(t, t.TempDir())
			sets := make([]*Set, tc.instances)
			errs := make([]error, tc.instances)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range sets {
				wg.Go(func() {
					<-start
					sets[i], errs[i] = Open(context.Background(), store, fixedClock, testKeys)
				})
			}
			close(start)
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("Open #%d: %v", i, err)
				}
			}
			assertAgree(t, store, sets)
		})
	}
}

// interleavingStore is a real store whose first n Updates each wait, after their
// function ran and before they commit, until all n got there (or a timeout), so
// their transactions overlap deterministically.
type interleavingStore struct {
	storage.Store
	mu       sync.Mutex
	waiting  int
	n        int
	release  chan struct{}
	timedOut bool // an Update stopped waiting: the transactions did not all overlap
}

func (s *interleavingStore) Update(ctx context.Context, fn func(storage.Txn) error) error {
	return s.Store.Update(ctx, func(txn storage.Txn) error {
		if err := fn(txn); err != nil {
			return err
		}
		s.mu.Lock()
		if s.n == 0 { // the barrier has opened: later attempts run freely
			s.mu.Unlock()
			return nil
		}
		s.waiting++
		if s.waiting == s.n {
			s.n = 0
			close(s.release)
		}
		s.mu.Unlock()
		select {
		case <-s.release:
		case <-time.After(time.Minute): // generous: key generation is slow on a loaded machine
			s.mu.Lock()
			s.timedOut = true
			s.mu.Unlock()
		}
		return nil
	})
}

// overlapped reports whether the n Updates met at the barrier.
func (s *interleavingStore) overlapped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n == 0 && !s.timedOut
}

// TestOpenRaceOverlapping makes the key creations of two first starts overlap in
// time, which plain goroutines rarely do (key generation comes first and takes a
// variable time): both transactions see no active key before either commits. The
// store is occStore, whose Updates overlap as two instances' do: Badger's group
// commit runs one process's Updates one after the other, so on it the barrier
// never filled and each case waited out its minute, overlapping nothing.
func TestOpenRaceOverlapping(t *testing.T) {
	for _, tc := range algorithms {
		t.Run(tc.alg, func(t *testing.T) {
			store := newOCCStore()
			// Give the other algorithm its key, so that only tc.alg is created.
			other := ES256
			if tc.alg == ES256 {
				other = RS256
			}
			seed := &Set{store: store, now: fixedClock, generate: keystest.Generator}
			if _, err := seed.create(context.Background(), other, noneActive); err != nil {
				t.Fatalf("creating %s key: %v", other, err)
			}
			racing := &interleavingStore{Store: store, n: 2, release: make(chan struct{})}
			sets := make([]*Set, 2)
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for i := range sets {
				wg.Go(func() { sets[i], errs[i] = Open(context.Background(), racing, fixedClock, testKeys) })
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("Open #%d: %v", i, err)
				}
			}
			if !racing.overlapped() {
				t.Fatal("the two key creations did not overlap: the test proves nothing")
			}
			assertAgree(t, store, sets)
		})
	}
}

// assertAgree checks that every set signs with the same key per algorithm, that the
// store marks exactly that key active, and that every set knows every stored key.
func assertAgree(t *testing.T, store storage.Store, sets []*Set) {
	t.Helper()
	for _, tc := range algorithms {
		active := storedActive(t, store, tc.alg)
		if len(active) != 1 {
			t.Errorf("store marks %d %s keys active (%v), want exactly 1", len(active), tc.alg, active)
		}
		for i, s := range sets {
			k := s.Active(tc.alg)
			if k == nil {
				t.Errorf("instance %d has no active %s key", i, tc.alg)
				continue
			}
			if len(active) == 1 && k.ID != active[0] {
				t.Errorf("instance %d signs %s with %s, store's active keys are %v", i, tc.alg, k.ID, active)
			}
			if k0 := sets[0].Active(tc.alg); k0 != nil && k0.ID != k.ID {
				t.Errorf("instances 0 and %d disagree on the %s key: %s vs %s", i, tc.alg, k0.ID, k.ID)
			}
			for _, r := range storedKeys(t, store, tc.alg) {
				if s.ByID(r.ID) == nil {
					t.Errorf("instance %d cannot verify with stored %s key %s", i, tc.alg, r.ID)
				}
			}
		}
	}
}

// TestRotationSeenByAnotherInstance: a key rotated in by one Set (instance) is found
// by another on the same store at once when a token names it (Lookup), and published
// by Watch within its interval when none does.
func TestRotationSeenByAnotherInstance(t *testing.T) {
	store := openStore(t, t.TempDir())
	a, b := openSet(t, store), openSet(t, store)
	ctx := context.Background()

	k, err := a.Rotate(ctx, ES256)
	if err != nil {
		t.Fatal(err)
	}
	if b.ByID(k.ID) != nil {
		t.Fatal("b knows the new key before reading the store: the test proves nothing")
	}
	got, err := b.Lookup(ctx, k.ID)
	if err != nil || got.ID != k.ID || !got.Active {
		t.Fatalf("b.Lookup(new kid) = %v, %v; want the new active key", got, err)
	}
	// An unknown kid again within unknownKIDReload reads nothing more.
	if _, err := b.Lookup(ctx, "made-up"); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("b.Lookup(made-up) = %v, want ErrUnknownKey", err)
	}

	k2, err := a.Rotate(ctx, RS256)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go b.Watch(wctx, 20*time.Millisecond)
	deadline := time.Now().Add(30 * time.Second) // a bound for a loaded machine; done at the first pick-up
	for b.Active(RS256) == nil || b.Active(RS256).ID != k2.ID {
		if time.Now().After(deadline) {
			t.Fatalf("b's Watch did not pick up the RS256 key rotated in by a within 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	found := false
	for _, j := range b.JWKS() {
		found = found || j.KeyID == k2.ID
	}
	if !found {
		t.Errorf("b's JWKS lacks %s after Watch reloaded it", k2.ID)
	}
}

// TestOpenAddsEdDSAToAnOlderStore: a store written by a version without EdDSA
// (RS256 and ES256 keys only) gets an EdDSA key on the next Open, and keeps the
// other keys as they were.
func TestOpenAddsEdDSAToAnOlderStore(t *testing.T) {
	store := openStore(t, t.TempDir())
	first := openSet(t, store)
	rs, es := first.Active(RS256).ID, first.Active(ES256).ID
	err := store.Update(context.Background(), func(txn storage.Txn) error {
		for _, r := range storedKeys(t, store, EdDSA) {
			if err := txn.Delete(keyKey(EdDSA, r.ID)); err != nil {
				return err
			}
		}
		return txn.Delete(keyLockKey(EdDSA))
	})
	if err != nil {
		t.Fatal(err)
	}
	again := openSet(t, store)
	if again.Active(EdDSA) == nil || again.Active(EdDSA).ID == first.Active(EdDSA).ID {
		t.Fatalf("no new EdDSA key on the older store: %v", again.Active(EdDSA))
	}
	if again.Active(RS256).ID != rs || again.Active(ES256).ID != es {
		t.Errorf("the RS256 and ES256 keys changed: %s %s, want %s %s", again.Active(RS256).ID, again.Active(ES256).ID, rs, es)
	}
	if n := len(storedKeys(t, store, EdDSA)); n != 1 {
		t.Errorf("%d EdDSA keys stored, want 1", n)
	}
}
