package oidc

import (
	"context"
	"errors"
	"testing"

	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/memstore"
)

// rerunStore runs every Update's fn twice: once in a transaction it then throws
// away, and again for real, as a store does when a transaction conflicts (or when
// Badger's group commit runs a member again after another member failed). Each fn
// must start from scratch every time.
type rerunStore struct{ storage.Store }

var errDiscard = errors.New("discarded first run")

func (s rerunStore) Update(ctx context.Context, fn func(storage.Txn) error) error {
	err := s.Store.Update(ctx, func(txn storage.Txn) error {
		if err := fn(txn); err != nil {
			return err
		}
		return errDiscard
	})
	if err != nil && !errors.Is(err, errDiscard) {
		return err
	}
	return s.Store.Update(ctx, fn)
}

// TestTransactionsRunTwice logs in, exchanges the code and refreshes on a store
// that runs every transaction twice: none of them may carry state from the first
// run into the second (an exchange used to find its own first run's grant id and
// report the code reused).
func TestTransactionsRunTwice(t *testing.T) {
	store := memstore.New() // core's rules, not Badger's, are under test
	h := newHarnessOn(t, rerunStore{store}, testSecret)
	l := h.login(t, params("scope", "openid offline_access"), "alice")
	tok, err := h.svc.ExchangeCode(context.Background(), "app", l.code, appRedirect, "")
	if err != nil {
		t.Fatalf("ExchangeCode on a store that reruns transactions: %v", err)
	}
	if _, err := h.svc.Refresh(context.Background(), "app", tok.RefreshToken, ""); err != nil {
		t.Fatalf("Refresh on a store that reruns transactions: %v", err)
	}
}
