// Package records is the domain's key convention, the one place that knows it: a
// record's key starts with its package and its kind ("agent/d/<deviceId>",
// "oidc/code/<hash>"), each package building its keys in its keys.go. Storage
// knows no key names; operators' counts and the migrate command's comparison group
// records by Kind.
package records

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/palmgate/palmgate/storage"
)

// Kind is the kind of the record under key: the first two slash-separated segments
// ("agent/d", "oidc/code"), or the whole key when it has fewer.
func Kind(key []byte) string {
	first := bytes.IndexByte(key, '/')
	if first < 0 {
		return string(key)
	}
	second := bytes.IndexByte(key[first+1:], '/')
	if second < 0 {
		return string(key[:first])
	}
	return string(key[:first+1+second])
}

// Get reads the JSON record under key in txn into a new T: notFound when there is
// none, the store's error as is, and a decoding error naming what (such as
// "grant 1234") for a record that is not a T.
func Get[T any](txn storage.Txn, key []byte, notFound error, what string) (*T, error) {
	b, err := txn.Get(key)
	return decode[T](b, err, notFound, what)
}

// Read is Get on its own, outside a transaction (see storage.ReadKey).
func Read[T any](ctx context.Context, s storage.Store, key []byte, notFound error, what string) (*T, error) {
	b, err := storage.ReadKey(ctx, s, key)
	return decode[T](b, err, notFound, what)
}

func decode[T any](b []byte, err error, notFound error, what string) (*T, error) {
	if errors.Is(err, storage.ErrNotFound) {
		return nil, notFound
	}
	if err != nil {
		return nil, err
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", what, err)
	}
	return &v, nil
}
