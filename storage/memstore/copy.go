package memstore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/palmgate/palmgate/storage"
)

var (
	_ storage.Exporter = (*Store)(nil)
	_ storage.Importer = (*Store)(nil)
)

// Export calls fn with every live record, in ascending byte order of keys, from the
// state of the last committed Update, with its expiry.
func (s *Store) Export(ctx context.Context, fn func(storage.Record) error) error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	now := time.Now()
	var recs []storage.Record
	for k, e := range s.data {
		if e.expires.IsZero() || now.Before(e.expires) {
			recs = append(recs, storage.Record{Key: []byte(k), Value: bytes.Clone(e.value), ExpiresAt: e.expires})
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(recs, func(a, b storage.Record) int { return bytes.Compare(a.Key, b.Key) })
	for _, r := range recs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// Import writes every record src exports, each expiring at its own ExpiresAt, into
// the store, which must hold no record (live or expired; otherwise the error wraps
// storage.ErrNotEmpty). Records already expired are skipped. Nothing is written
// unless src exported every record without an error.
func (s *Store) Import(ctx context.Context, src storage.Exporter) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, ErrClosed
	}
	if len(s.data) > 0 {
		return 0, fmt.Errorf("memstore: import: %w: it holds %d records", storage.ErrNotEmpty, len(s.data))
	}
	staged := map[string]entry{}
	err := src.Export(ctx, func(r storage.Record) error {
		if !r.ExpiresAt.IsZero() && !r.ExpiresAt.After(time.Now()) {
			return nil
		}
		staged[string(r.Key)] = entry{value: bytes.Clone(r.Value), expires: r.ExpiresAt}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("memstore: import: %w", err)
	}
	s.data = staged
	s.watches.ChangedAll()
	return len(staged), nil
}
