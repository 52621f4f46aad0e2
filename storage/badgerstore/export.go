package badgerstore

import (
	"context"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/palmgate/palmgate/storage"
)

var _ storage.Exporter = (*Store)(nil)

// Export calls fn with every live record, in ascending byte order of keys, from one
// read transaction, with its expiry: Badger's, a whole Unix second (see Txn.Set).
// Records already expired are skipped (Badger's iterator leaves them out). ctx is
// checked between records.
func (s *Store) Export(ctx context.Context, fn func(storage.Record) error) error {
	return s.View(ctx, func(t storage.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false // see txn.iterate
		it := t.(*txn).btx.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("badgerstore: export: %w", err)
			}
			item := it.Item()
			value, err := item.ValueCopy(nil)
			if err != nil {
				return mapErr("export: reading value", err)
			}
			r := storage.Record{Key: item.KeyCopy(nil), Value: value}
			if exp := item.ExpiresAt(); exp > 0 {
				r.ExpiresAt = time.Unix(int64(exp), 0)
			}
			if err := fn(r); err != nil {
				return err
			}
		}
		return nil
	})
}
