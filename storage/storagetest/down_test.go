package storagetest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/memstore"
	"github.com/palmgate/palmgate/storage/storagetest"
)

// TestDownStore: while down, every View and Update fails with ErrDown (an
// ErrUnavailable) and reaches nothing; DownAfterUpdate lets the next Update
// commit, then takes the store down; a cancelled context fails first; every
// call is counted.
func TestDownStore(t *testing.T) {
	ctx := context.Background()
	s := &storagetest.DownStore{Store: memstore.New()}
	set := func(v string) error {
		return s.Update(ctx, func(txn storage.Txn) error { return txn.Set([]byte("k"), []byte(v), 0) })
	}
	get := func() (string, error) {
		v, err := storage.ReadKey(ctx, s, []byte("k"))
		return string(v), err
	}
	if err := set("1"); err != nil {
		t.Fatal(err)
	}
	s.Down.Store(true)
	if err := set("2"); !errors.Is(err, storagetest.ErrDown) || !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Update while down = %v, want ErrDown, an ErrUnavailable", err)
	}
	if _, err := get(); !errors.Is(err, storagetest.ErrDown) {
		t.Errorf("View while down = %v, want ErrDown", err)
	}
	s.Down.Store(false)
	if v, err := get(); v != "1" || err != nil {
		t.Errorf("after the outage the value is %q, %v; want the one written before it", v, err)
	}

	s.DownAfterUpdate.Store(true)
	if err := set("3"); err != nil {
		t.Fatalf("the Update that takes the store down failed: %v", err)
	}
	if !s.Down.Load() {
		t.Error("DownAfterUpdate left the store up")
	}
	s.DownAfterUpdate.Store(false)
	s.Down.Store(false)
	if v, err := get(); v != "3" || err != nil {
		t.Errorf("the last Update before the outage wrote %q, %v; want 3", v, err)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	s.Down.Store(true) // the context is checked first, as a backend checks it before dialing
	if err := s.View(cancelled, func(storage.Txn) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("View with a cancelled context = %v, want context.Canceled", err)
	}
	if err := s.Update(cancelled, func(storage.Txn) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Update with a cancelled context = %v, want context.Canceled", err)
	}
	if v, u := s.Views.Load(), s.Updates.Load(); v != 4 || u != 4 {
		t.Errorf("counted %d Views and %d Updates, want 4 and 4", v, u)
	}
}
