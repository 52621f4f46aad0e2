package pgstore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/palmgate/palmgate/internal/pgtest"
	"github.com/palmgate/palmgate/storage"
)

// BenchmarkGroupedUpdates runs Updates shaped like a registration's completion
// (five keys read in one prefetch, four of them absent; six written, one of them a
// counter shared by one Update in 2,000) from 64 goroutines, on one Store or on
// two Stores of one database (two palmgate instances, the goroutines alternating
// between them), with and without grouped commits, on a durable private cluster
// whose table holds 200,000 records:
//
//	go test -run '^$' -bench GroupedUpdates -benchtime 5s ./storage/pgstore
func BenchmarkGroupedUpdates(b *testing.B) {
	for _, stores := range []int{1, 2} {
		for _, grouped := range []bool{true, false} {
			b.Run(fmt.Sprintf("stores=%d/grouped=%v", stores, grouped), func(b *testing.B) {
				cluster := pgtest.NewClusterWith(b, pgtest.ClusterOptions{Durable: true})
				dsn := cluster.DSN(b)
				var ss []*Store
				for range stores {
					s := closeT(b, openT(b, config(b, dsn)))
					s.noGroups = !grouped
					ss = append(ss, s)
				}
				// A table of a size that spreads the hash index over many buckets, as
				// a server's does: on an empty one, every read of an absent key
				// conflicts with every insert.
				admin := sqlConn(b, dsn)
				for _, q := range []string{
					`INSERT INTO palmgate_kv SELECT convert_to('seed/' || i, 'UTF8'), '\x00', NULL FROM generate_series(1, 200000) i`,
					`VACUUM ANALYZE palmgate_kv`, `CHECKPOINT`,
				} {
					if _, err := admin.Exec(context.Background(), q); err != nil {
						b.Fatal(err)
					}
				}
				var seq atomic.Int64
				b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0))) // 64 goroutines
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						n := seq.Add(1)
						if err := ss[n%int64(len(ss))].Update(context.Background(), registrationLike(n)); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.StopTimer()
				var st Stats
				for _, s := range ss {
					x := s.Stats()
					st.Retries += x.Retries
					st.Grouped += x.Grouped
				}
				b.ReportMetric(float64(st.Retries)/float64(b.N), "retries/op")
				b.ReportMetric(float64(st.Grouped)/float64(b.N), "grouped/op")
			})
		}
	}
}

// registrationLike is the fn of Update n of BenchmarkGroupedUpdates.
func registrationLike(n int64) func(storage.Txn) error {
	id := strconv.FormatInt(n, 10)
	human := "bench/h/" + strconv.FormatInt(n%2000, 10)
	keys := []string{"bench/d/" + id, "bench/k/" + id, "bench/p/" + id, "bench/s/" + id, human}
	return func(tx storage.Txn) error {
		bs := make([][]byte, len(keys))
		for i, k := range keys {
			bs[i] = []byte(k)
		}
		if err := storage.Prefetch(tx, bs...); err != nil {
			return err
		}
		for _, k := range bs[:4] {
			if _, err := tx.Get(k); err == nil {
				return fmt.Errorf("%s exists", k)
			} else if !errors.Is(err, storage.ErrNotFound) {
				return err
			}
		}
		if err := increment(tx, human); err != nil {
			return err
		}
		value := make([]byte, 200)
		for _, k := range []string{"bench/d/" + id, "bench/k/" + id, "bench/s/" + id, "bench/lb/" + id} {
			if err := tx.Set([]byte(k), value, 0); err != nil {
				return err
			}
		}
		return tx.Delete([]byte("bench/p/" + id))
	}
}
