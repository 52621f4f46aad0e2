package keys

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/clocktest"
	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/memstore"
)

// Token lifetimes of the retirement tests: ES256 signs access and refresh tokens
// (the longer), the others ID tokens.
var testLifetimes = map[string]time.Duration{RS256: time.Hour, ES256: 48 * time.Hour, EdDSA: time.Hour}

// openClocked opens a Set on store with the settable clock and testLifetimes.
func openClocked(t *testing.T, store storage.Store, clock *clocktest.Clock) *Set {
	t.Helper()
	s, err := Open(context.Background(), store, clock.Now, testKeys, WithLifetimes(testLifetimes))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// jwksHas reports whether s publishes kid.
func jwksHas(s *Set, kid string) bool {
	for _, j := range s.JWKS() {
		if j.KeyID == kid {
			return true
		}
	}
	return false
}

// storedIDs is the kids of the stored keys of alg.
func storedIDs(t *testing.T, store storage.Store, alg string) []string {
	t.Helper()
	var kids []string
	for _, r := range storedKeys(t, store, alg) {
		kids = append(kids, r.ID)
	}
	slices.Sort(kids)
	return kids
}

// TestRetiredKeyKeptUntilItsTokensExpire: a rotation retires the old key at that
// time; it stays published and found (on this instance and another) until its
// algorithm's longest token lifetime plus RetireMargin has passed, and is then
// hidden at once and deleted by Prune, leaving the other keys alone.
func TestRetiredKeyKeptUntilItsTokensExpire(t *testing.T) {
	for _, alg := range Algorithms {
		t.Run(alg, func(t *testing.T) {
			ctx := context.Background()
			clock := clocktest.New(testNow)
			store := memstore.New()
			s := openClocked(t, store, clock)
			other := openClocked(t, store, clock) // another instance on the store
			old := s.Active(alg)

			clock.Advance(10 * time.Minute)
			rotatedAt := clock.Now()
			rotated, err := s.Rotate(ctx, alg)
			if err != nil {
				t.Fatalf("Rotate: %v", err)
			}
			got := s.ByID(old.ID)
			if got == nil || got.Active || !got.Retired.Equal(rotatedAt) {
				t.Fatalf("old key after the rotation = %+v, want inactive, retired at %v", got, rotatedAt)
			}
			dropsAt := rotatedAt.Add(testLifetimes[alg] + RetireMargin)
			if !got.DropsAt.Equal(dropsAt) {
				t.Errorf("DropsAt = %v, want %v (retired + lifetime + margin)", got.DropsAt, dropsAt)
			}
			if a := s.Active(alg); !a.Retired.IsZero() || !a.DropsAt.IsZero() {
				t.Errorf("the active key has Retired %v, DropsAt %v; want zero", a.Retired, a.DropsAt)
			}

			// A second before the drop: published, found, stored; Prune keeps it.
			clock.Set(dropsAt.Add(-time.Second))
			if err := other.Reload(ctx); err != nil {
				t.Fatal(err)
			}
			for name, set := range map[string]*Set{"rotating": s, "other": other} {
				if !jwksHas(set, old.ID) {
					t.Errorf("%s instance: the retired key left the JWKS before its tokens expired", name)
				}
				if k, err := set.Lookup(ctx, old.ID); err != nil || k.ID != old.ID {
					t.Errorf("%s instance: Lookup(retired kid) = %v, %v; want the key", name, k, err)
				}
			}
			if dropped, err := s.Prune(ctx); err != nil || len(dropped) != 0 {
				t.Errorf("Prune before the drop time = %v, %v; want nothing", dropped, err)
			}
			if ids := storedIDs(t, store, alg); !slices.Contains(ids, old.ID) {
				t.Errorf("stored %s keys = %v, want the retired one still there", alg, ids)
			}

			// At the drop time: hidden at once (even before Prune deletes it).
			clock.Set(dropsAt)
			for name, set := range map[string]*Set{"rotating": s, "other": other} {
				if jwksHas(set, old.ID) {
					t.Errorf("%s instance: the JWKS still lists the key past its drop time", name)
				}
				if k := set.ByID(old.ID); k != nil {
					t.Errorf("%s instance: ByID(dropped kid) = %v, want nil", name, k.ID)
				}
				if slices.ContainsFunc(set.List(), func(k *Key) bool { return k.ID == old.ID }) {
					t.Errorf("%s instance: List still shows the dropped key", name)
				}
			}
			dropped, err := s.Prune(ctx)
			if err != nil || len(dropped) != 1 || dropped[0].ID != old.ID || dropped[0].Private != nil {
				t.Fatalf("Prune at the drop time = %v, %v; want the retired key alone, no private half", dropped, err)
			}
			if ids := storedIDs(t, store, alg); !slices.Equal(ids, []string{rotated.ID}) {
				t.Errorf("stored %s keys = %v, want only the active %s", alg, ids, rotated.ID)
			}
			for _, a := range Algorithms {
				if a != alg && len(storedKeys(t, store, a)) != 1 {
					t.Errorf("Prune touched the %s keys", a)
				}
			}
			// Gone from the store: a fresh instance never loads it, and Lookup fails.
			fresh := openClocked(t, store, clock)
			if _, err := fresh.Lookup(ctx, old.ID); !errors.Is(err, ErrUnknownKey) {
				t.Errorf("Lookup(deleted kid) on a fresh instance = %v, want ErrUnknownKey", err)
			}
			if _, err := other.Lookup(ctx, old.ID); !errors.Is(err, ErrUnknownKey) {
				t.Errorf("Lookup(deleted kid) on the other instance = %v, want ErrUnknownKey", err)
			}
			if dropped, err := other.Prune(ctx); err != nil || len(dropped) != 0 {
				t.Errorf("a second Prune = %v, %v; want nothing", dropped, err)
			}
		})
	}
}

// TestRetirementOfKeysStoredWithoutOne: retired keys stored by a version that did
// not record retirements were retired when the next key of their algorithm was
// created; a retired key with no later key cannot be dated and is kept.
func TestRetirementOfKeysStoredWithoutOne(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New(testNow)
	store := memstore.New()
	s := openClocked(t, store, clock)
	first := s.Active(ES256)
	clock.Advance(time.Hour)
	second, err := s.Rotate(ctx, ES256)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	third, err := s.Rotate(ctx, ES256)
	if err != nil {
		t.Fatal(err)
	}
	// Rewrite the records as the earlier version stored them: no "retired".
	stripRetired(t, store, ES256)
	if err := s.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		kid     string
		retired time.Time
	}{{first.ID, second.Created}, {second.ID, third.Created}} {
		k := s.ByID(tc.kid)
		if k == nil || !k.Retired.Equal(tc.retired) || !k.DropsAt.Equal(tc.retired.Add(testLifetimes[ES256]+RetireMargin)) {
			t.Errorf("key %s: %+v; want retired at %v (the next key's creation)", tc.kid, k, tc.retired)
		}
	}
	clock.Set(second.Created.Add(testLifetimes[ES256] + RetireMargin))
	dropped, err := s.Prune(ctx)
	if err != nil || len(dropped) != 1 || dropped[0].ID != first.ID {
		t.Errorf("Prune = %v, %v; want the first key only", dropped, err)
	}

	// A retired key with no later key of its algorithm (no rotation created it
	// away): kept, whatever the time.
	orphan := memstore.New()
	o := openClocked(t, orphan, clock)
	kid := o.Active(EdDSA).ID
	err = orphan.Update(ctx, func(txn storage.Txn) error {
		b, err := txn.Get(keyKey(EdDSA, kid))
		if err != nil {
			return err
		}
		var r record
		if err := json.Unmarshal(b, &r); err != nil {
			return err
		}
		r.Active = false
		b, _ = json.Marshal(r)
		return txn.Set(keyKey(EdDSA, kid), b, 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * 365 * 24 * time.Hour)
	if err := o.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if k := o.ByID(kid); k == nil || !k.DropsAt.IsZero() {
		t.Errorf("undatable retired key = %+v, want it kept (no drop time)", k)
	}
	if dropped, err := o.Prune(ctx); err != nil || len(dropped) != 0 {
		t.Errorf("Prune = %v, %v; want nothing", dropped, err)
	}
}

// stripRetired rewrites the stored records of alg without their retirement time.
func stripRetired(t *testing.T, store storage.Store, alg string) {
	t.Helper()
	recs := storedKeys(t, store, alg)
	err := store.Update(context.Background(), func(txn storage.Txn) error {
		for _, r := range recs {
			var m map[string]any
			b, _ := json.Marshal(r)
			if err := json.Unmarshal(b, &m); err != nil {
				return err
			}
			delete(m, "retired")
			b, _ = json.Marshal(m)
			if err := txn.Set(keyKey(alg, r.ID), b, 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWithoutLifetimesKeysAreKept: a Set told no token lifetimes never drops a
// retired key (what it did before retirement existed).
func TestWithoutLifetimesKeysAreKept(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New(testNow)
	store := memstore.New()
	s, err := Open(ctx, store, clock.Now, testKeys)
	if err != nil {
		t.Fatal(err)
	}
	old := s.Active(ES256)
	if _, err := s.Rotate(ctx, ES256); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * 365 * 24 * time.Hour)
	if k := s.ByID(old.ID); k == nil || k.Retired.IsZero() || !k.DropsAt.IsZero() {
		t.Errorf("retired key = %+v, want retired, with no drop time", k)
	}
	if dropped, err := s.Prune(ctx); err != nil || len(dropped) != 0 || !jwksHas(s, old.ID) {
		t.Errorf("Prune = %v, %v, published %v; want nothing dropped", dropped, err, jwksHas(s, old.ID))
	}
}
