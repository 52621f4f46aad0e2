package pgstore

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// sqlSweep deletes at most $1 expired records. The outer condition is checked again
// on the row version the DELETE finds: a record that a concurrent transaction set
// again (live now) after the subquery saw it expired is left alone.
const sqlSweep = `DELETE FROM palmgate_kv WHERE expires_at <= now()
AND key IN (SELECT key FROM palmgate_kv WHERE expires_at <= now() LIMIT $1)`

// runSweeper sweeps every interval until stopSweep is closed.
func (s *Store) runSweeper(interval time.Duration) {
	defer close(s.sweepDone)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stopSweep:
			cancel()
		case <-ctx.Done():
		}
	}()
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		s.sweep(ctx)
	}
}

// sweep deletes expired records in batches of at most sweepBatch, each its own
// transaction, until a batch deletes fewer or ctx ends. Instances sweeping at the same
// time only delete some records twice over (the second DELETE finds none).
func (s *Store) sweep(ctx context.Context) {
	var total int64
	for ctx.Err() == nil {
		tag, err := s.pool.Exec(ctx, sqlSweep, s.sweepBatch)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("pgstore: deleting expired records failed", zap.String("database", s.host),
					zap.Error(s.wrap(ctx, "sweep", err)))
			}
			break
		}
		n := tag.RowsAffected()
		total += n
		s.swept.Add(uint64(n))
		if s.sweepHook != nil {
			s.sweepHook(n)
		}
		if n < int64(s.sweepBatch) {
			break
		}
	}
	if total > 0 {
		s.log.Debug("pgstore: deleted expired records", zap.String("database", s.host), zap.Int64("count", total))
	}
}
