package storage_test

import (
	"context"
	"testing"

	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/memstore"
)

// TestDeletePrefix: every record under the prefix goes and is counted; a
// neighbour sharing the prefix's text without its slash stays.
func TestDeletePrefix(t *testing.T) {
	s := memstore.New()
	ctx := context.Background()
	err := s.Update(ctx, func(txn storage.Txn) error {
		for _, k := range []string{"p/a/1", "p/a/2", "p/ab", "p/b/1"} {
			if err := txn.Set([]byte(k), nil, 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.Update(ctx, func(txn storage.Txn) (err error) { n, err = storage.DeletePrefix(txn, []byte("p/a/")); return err }); err != nil || n != 2 {
		t.Fatalf("DeletePrefix = %d, %v; want 2", n, err)
	}
	var left []string
	_ = s.View(ctx, func(txn storage.Txn) error {
		return txn.IterateKeys([]byte("p/"), func(k []byte) (bool, error) { left = append(left, string(k)); return true, nil })
	})
	if len(left) != 2 || left[0] != "p/ab" || left[1] != "p/b/1" {
		t.Errorf("left = %v; want p/ab, p/b/1", left)
	}
}
