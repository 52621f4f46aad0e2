package storage_test

import (
	"context"
	"maps"
	"testing"

	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/badgerstore"
)

func TestCountByKind(t *testing.T) {
	s, err := badgerstore.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	err = s.Update(ctx, func(txn storage.Txn) error {
		for _, k := range []string{"agent/d/a", "agent/d/b/c", "agent/s/x", "keys/ES256/k1", "lonely"} {
			if err := txn.Set([]byte(k), nil, 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := storage.CountByKind(ctx, s, firstTwo)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"agent/d": 2, "agent/s": 1, "keys/ES256": 1, "lonely": 1}
	if !maps.Equal(got, want) {
		t.Errorf("CountByKind = %v, want %v", got, want)
	}
}
