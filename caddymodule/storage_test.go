package caddymodule

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"

	"github.com/palmgate/palmgate/internal/pgtest"
	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/badgerstore"
	"github.com/palmgate/palmgate/storage/pgstore"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The app hands core the store itself, so that core sees its optional
// capabilities: a wrapper embedding storage.Store hid pgstore's ReadKey, and every
// ReadKey on PostgreSQL cost a View's two round trips.
func TestOpenStoreKeepsCapabilities(t *testing.T) {
	t.Run("badger", func(t *testing.T) {
		a := &App{Storage: &StorageConfig{Backend: "badger", Path: t.TempDir()}, logger: zap.NewNop()}
		if err := a.openStore(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Cleanup() })
		if _, ok := a.Store().(*badgerstore.Store); !ok {
			t.Errorf("store is %T, want *badgerstore.Store", a.Store())
		}
	})
	t.Run("postgres", func(t *testing.T) {
		a := &App{Storage: &StorageConfig{Backend: "postgres", DSN: pgtest.DSN(t)}, logger: zap.NewNop()}
		a.Storage.setDefaults()
		if err := a.openStore(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Cleanup() })
		if _, ok := a.Store().(*pgstore.Store); !ok {
			t.Errorf("store is %T, want *pgstore.Store", a.Store())
		}
		if _, ok := a.Store().(storage.KeyReader); !ok {
			t.Errorf("store %T is not a storage.KeyReader", a.Store())
		}
	})
}

// TestStorageGroupCommitsOff: `group_commits off` reaches pgstore: concurrent
// Updates of the app's store never share a transaction.
func TestStorageGroupCommitsOff(t *testing.T) {
	a := &App{Storage: &StorageConfig{Backend: "postgres", DSN: pgtest.DSN(t), DisableGroupCommits: true}, logger: zap.NewNop()}
	a.Storage.setDefaults()
	if err := a.Storage.validate(); err != nil {
		t.Fatal(err)
	}
	if err := a.openStore(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Cleanup() })
	s := a.Store().(*pgstore.Store)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := range 10 {
				err := s.Update(t.Context(), func(tx storage.Txn) error {
					return tx.Set(fmt.Appendf(nil, "k/%d/%d", w, i), []byte("x"), 0)
				})
				if err != nil {
					t.Errorf("Update: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if st := s.Stats(); st.Groups != 0 {
		t.Errorf("Stats = %+v: Updates shared a transaction with group_commits off", st)
	}
}

// TestOpenStoreLockedBadger: a Badger directory another process holds (another
// Caddy on the same `storage badger`) fails the load with the option, the
// directory once, and what to do (fourth review).
func TestOpenStoreLockedBadger(t *testing.T) {
	dir := t.TempDir()
	held, err := badgerstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Close() })
	a := &App{Storage: &StorageConfig{Backend: "badger", Path: dir}, logger: zap.NewNop()}
	err = a.openStore()
	if err == nil {
		a.Cleanup()
		t.Fatal("opened a Badger directory another store holds")
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "storage badger: ") || strings.Count(msg, dir) != 1 || !strings.Contains(msg, "stop it") || !strings.Contains(msg, "storage postgres") {
		t.Errorf("error %q, want it to start with the option, name %s once and say to stop the other or use storage postgres", msg, dir)
	}
}
