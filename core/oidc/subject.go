package oidc

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/palmgate/palmgate/storage"
)

// PairwiseSubject is the `sub` of humanID at a sector: base64url (no padding) of
// HMAC-SHA256(secret, sector || 0x00 || humanID). It is stable for one sector and
// unlinkable across sectors.
func PairwiseSubject(secret []byte, sector, humanID string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(sector))
	m.Write([]byte{0})
	m.Write([]byte(humanID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// loadPairwiseSecret returns the configured secret, or the one stored on first start
// (generated then). Concurrent first starts of several instances agree on one: the
// read and the write are one transaction, and the store runs the loser again (a
// conflict), which then reads the winner's secret. Loaded once: it never changes.
func loadPairwiseSecret(ctx context.Context, store storage.Store, configured string) ([]byte, error) {
	if configured != "" {
		return []byte(configured), nil
	}
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	var secret []byte
	err := store.Update(ctx, func(txn storage.Txn) error {
		b, err := txn.Get(pairwiseSecretKey())
		if err == nil {
			secret = b
			return nil
		}
		if !errors.Is(err, storage.ErrNotFound) {
			return err
		}
		secret = fresh
		return txn.Set(pairwiseSecretKey(), fresh, 0)
	})
	if err != nil {
		return nil, fmt.Errorf("loading pairwise secret: %w", err)
	}
	return secret, nil
}
