package oidc

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
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

// lostCommitStore is a store whose Updates, while fail is set, run fn and then
// fail as a lost commit does, having committed nothing.
type lostCommitStore struct {
	storage.Store
	fail *atomic.Bool
}

func (s lostCommitStore) Update(ctx context.Context, fn func(storage.Txn) error) error {
	if !s.fail.Load() {
		return s.Store.Update(ctx, fn)
	}
	err := s.Store.Update(ctx, func(txn storage.Txn) error {
		if err := fn(txn); err != nil {
			return err
		}
		return errDiscard
	})
	if err != nil && !errors.Is(err, errDiscard) {
		return err
	}
	return fmt.Errorf("commit lost: %w", storage.ErrUnavailable)
}

// TestRevocationAfterCommit: a revocation whose transaction did not commit (its fn
// ran, the commit failed) leaves this instance's revocation set as it was, for
// each way a grant is revoked: a revoke request, a reused code, a reused refresh
// token. Once committed, the same revocation is in the set at once. (The set used
// to be changed inside the transaction's fn, which may run again or not commit.)
func TestRevocationAfterCommit(t *testing.T) {
	ctx := context.Background()
	var fail atomic.Bool
	h := newHarnessOn(t, lostCommitStore{memstore.New(), &fail}, testSecret)
	cases := []struct {
		name   string
		revoke func(t *testing.T, l login, tok *TokenResponse) error
	}{
		{"revoke request", func(t *testing.T, l login, tok *TokenResponse) error {
			return h.svc.Revoke(ctx, "app", tok.AccessToken)
		}},
		{"reused code", func(t *testing.T, l login, tok *TokenResponse) error {
			_, err := h.svc.ExchangeCode(ctx, "app", l.code, appRedirect, "")
			return err
		}},
		{"reused refresh token", func(t *testing.T, l login, tok *TokenResponse) error {
			_, err := h.svc.Refresh(ctx, "app", tok.RefreshToken, "")
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := h.login(t, params("scope", "openid offline_access"), "alice")
			tok := h.exchange(t, l, "")
			claims, err := h.svc.VerifyAccessToken(ctx, tok.AccessToken)
			if err != nil {
				t.Fatal(err)
			}
			if tc.name == "reused refresh token" {
				if _, err := h.svc.Refresh(ctx, "app", tok.RefreshToken, ""); err != nil {
					t.Fatal(err) // rotated: tok.RefreshToken is now a reused one
				}
			}
			fail.Store(true)
			err = tc.revoke(t, l, tok)
			fail.Store(false)
			if !errors.Is(err, storage.ErrUnavailable) {
				t.Fatalf("revoking with a lost commit: %v, want unavailable", err)
			}
			if ok, err := h.svc.Revocations().Revoked(ctx, claims.GrantID); ok || err != nil {
				t.Errorf("after a revocation that did not commit: Revoked = %v, %v; want false", ok, err)
			}
			if _, err := h.svc.VerifyAccessToken(ctx, tok.AccessToken); err != nil {
				t.Errorf("the access token after a revocation that did not commit: %v", err)
			}
			tc.revoke(t, l, tok) // committed this time
			if ok, err := h.svc.Revocations().Revoked(ctx, claims.GrantID); !ok || err != nil {
				t.Errorf("after a committed revocation: Revoked = %v, %v; want true", ok, err)
			}
		})
	}
}
