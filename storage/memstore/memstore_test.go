package memstore

import (
	"testing"

	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/storagetest"
)

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store {
		s := New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
	storagetest.RunWatcher(t, func(*testing.T) storage.Store { return New() })
}

func TestCloseIdempotentAndUseAfterClose(t *testing.T) {
	storagetest.RunClosed(t, func(*testing.T) storage.Store { return New() }, ErrClosed)
}
