package badgerstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/palmgate/palmgate/storage"
)

func TestExport(t *testing.T) {
	s := open(t, t.TempDir())
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	before := time.Now()
	err := s.Update(ctx, func(txn storage.Txn) error {
		for _, r := range []struct {
			k, v string
			ttl  time.Duration
		}{{"b/x/1", "one", 0}, {"a/y/2", "", 3 * time.Minute}, {"c", "three", time.Hour}} {
			if err := txn.Set([]byte(r.k), []byte(r.v), r.ttl); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// An expired record: Badger's iterator must leave it out.
	err = s.db.Update(func(txn *badger.Txn) error {
		e := badger.NewEntry([]byte("b/x/0"), []byte("gone"))
		e.ExpiresAt = uint64(time.Now().Add(-time.Second).Unix())
		return txn.SetEntry(e)
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []storage.Record
	if err := s.Export(ctx, func(r storage.Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("Export gave %d records, want 3 (the expired one left out): %+v", len(got), got)
	}
	for i, want := range []struct {
		k, v string
		ttl  time.Duration
	}{{"a/y/2", "", 3 * time.Minute}, {"b/x/1", "one", 0}, {"c", "three", time.Hour}} {
		r := got[i]
		if string(r.Key) != want.k || string(r.Value) != want.v {
			t.Errorf("record %d = %q:%q, want %q:%q", i, r.Key, r.Value, want.k, want.v)
		}
		switch {
		case want.ttl == 0 && !r.ExpiresAt.IsZero():
			t.Errorf("%s: ExpiresAt %v, want none", r.Key, r.ExpiresAt)
		case want.ttl > 0:
			// Set rounds the expiry up to a whole second.
			lo, hi := before.Add(want.ttl), time.Now().Add(want.ttl+time.Second)
			if r.ExpiresAt.Before(lo) || r.ExpiresAt.After(hi) {
				t.Errorf("%s: ExpiresAt %v, want within [%v, %v]", r.Key, r.ExpiresAt, lo, hi)
			}
		}
	}

	boom := errors.New("boom")
	n := 0
	err = s.Export(ctx, func(storage.Record) error { n++; return boom })
	if !errors.Is(err, boom) || n != 1 {
		t.Errorf("Export with a failing fn: %v after %d records, want boom after 1", err, n)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Export(canceled, func(storage.Record) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Export with a canceled context: %v", err)
	}
}

func TestOpenLocked(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	t.Cleanup(func() { s.Close() })
	_, err := Open(dir, nil)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("opening a directory open elsewhere: %v, want ErrLocked", err)
	}
	s.Close()
	again, err := Open(dir, nil)
	if err != nil {
		t.Fatalf("opening it once closed: %v", err)
	}
	again.Close()
}
