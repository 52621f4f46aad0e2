package caddymodule

import (
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
