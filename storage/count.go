package storage

import (
	"bytes"
	"context"
)

// CountByKind counts the live records of a store by kind: the first two
// slash-separated segments of their keys ("agent/d", "oidc/code", ...). It reads every
// key, so it is for operators and tests, not for hot paths.
func CountByKind(ctx context.Context, s Store) (map[string]int, error) {
	counts := map[string]int{}
	err := s.View(ctx, func(txn Txn) error {
		clear(counts)
		return txn.IterateKeys(nil, func(key []byte) (bool, error) {
			counts[kindOf(key)]++
			return true, nil
		})
	})
	return counts, err
}

func kindOf(key []byte) string {
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
