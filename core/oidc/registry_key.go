package oidc

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/palmgate/palmgate/storage"
)

// secretMAC is the keyed hash a dynamic client's secret is stored as.
func (r *Clients) secretMAC(secret string) []byte {
	m := hmac.New(sha256.New, r.clientKey)
	m.Write([]byte(secret))
	return m.Sum(nil)
}

// loadClientKey returns the key of dynamic client secrets' hashes, generated and
// stored on first start (concurrent first starts agree on one).
func loadClientKey(ctx context.Context, store storage.Store) ([]byte, error) {
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	var key []byte
	err := store.Update(ctx, func(txn storage.Txn) error {
		b, err := txn.Get(clientSecretKeyKey())
		if err == nil {
			key = b
			return nil
		}
		if !errors.Is(err, storage.ErrNotFound) {
			return err
		}
		key = fresh
		return txn.Set(clientSecretKeyKey(), fresh, 0)
	})
	if err != nil {
		return nil, fmt.Errorf("loading client secret key: %w", err)
	}
	return key, nil
}

// DerivedKey is a 256-bit key for label, derived from a key every instance on the
// store shares (the developer portal signs its session cookies with one).
func (s *Service) DerivedKey(label string) []byte {
	m := hmac.New(sha256.New, s.clients.clientKey)
	m.Write([]byte("derived\x00" + label))
	return m.Sum(nil)
}
