package storage

import (
	"context"
)

// KindFunc names the kind of the record under key. Storage knows no key names: the
// domain's rule is passed in (core/records.Kind).
type KindFunc func(key []byte) string

// CountByKind counts the live records of a store by kind. It reads every key, so it
// is for operators and tests, not for hot paths.
func CountByKind(ctx context.Context, s Store, kind KindFunc) (map[string]int, error) {
	counts := map[string]int{}
	err := s.View(ctx, func(txn Txn) error {
		clear(counts)
		return txn.IterateKeys(nil, func(key []byte) (bool, error) {
			counts[kind(key)]++
			return true, nil
		})
	})
	return counts, err
}
