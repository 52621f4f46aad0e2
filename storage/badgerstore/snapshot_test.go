package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/palmgate/palmgate/storage"
)

// viewTxn returns the Badger transaction a View reads.
func viewTxn(t *testing.T, s *Store) *badger.Txn {
	t.Helper()
	var btx *badger.Txn
	if err := s.View(t.Context(), func(tx storage.Txn) error {
		btx = tx.(*txn).btx
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return btx
}

func set(t *testing.T, s *Store, key, value string, ttl time.Duration) {
	t.Helper()
	if err := s.Update(t.Context(), func(tx storage.Txn) error {
		return tx.Set([]byte(key), []byte(value), ttl)
	}); err != nil {
		t.Fatal(err)
	}
}

// wantValue checks that a View reads want under key, and returns the Badger
// transaction it read.
func wantValue(t *testing.T, s *Store, key, want string) *badger.Txn {
	t.Helper()
	var btx *badger.Txn
	if err := s.View(t.Context(), func(tx storage.Txn) error {
		btx = tx.(*txn).btx
		v, err := tx.Get([]byte(key))
		if err == nil && string(v) != want {
			err = fmt.Errorf("%s = %q, want %q", key, v, want)
		}
		return err
	}); err != nil {
		t.Error(err)
	}
	return btx
}

// TestViewsShareASnapshotUntilACommit: Views read one transaction until an
// Update commits (whether grouped or not); the next View reads a new one, which
// sees the commit.
func TestViewsShareASnapshotUntilACommit(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	first := viewTxn(t, s)
	if again := viewTxn(t, s); again != first {
		t.Error("two Views with no commit between them began two transactions, want one shared")
	}
	set(t, s, "k", "v1", 0)
	if wantValue(t, s, "k", "v1") == first {
		t.Error("a View after a commit read the snapshot from before it")
	}
}

// TestAnUpdateRunAloneRetiresTheSnapshot: an Update whose grouped commit
// conflicts runs again in a transaction of its own (attempt); that commit
// retires the snapshot too, including one a View began while it ran.
func TestAnUpdateRunAloneRetiresTheSnapshot(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	set(t, s, "k", "v0", 0)
	runs := 0
	var during *badger.Txn
	err := s.Update(t.Context(), func(tx storage.Txn) error {
		runs++
		if _, err := tx.Get([]byte("k")); err != nil {
			return err
		}
		if runs == 1 {
			// Another writer commits k meanwhile: this run's commit conflicts.
			other := s.db.NewTransaction(true)
			defer other.Discard()
			if err := other.Set([]byte("k"), []byte("other")); err != nil {
				return err
			}
			if err := other.Commit(); err != nil {
				return err
			}
		} else {
			// A View elsewhere begins a snapshot before this run commits.
			got := make(chan *badger.Txn)
			go func() {
				var btx *badger.Txn
				_ = s.View(context.Background(), func(tx storage.Txn) error { btx = tx.(*txn).btx; return nil })
				got <- btx
			}()
			during = <-got
		}
		return tx.Set([]byte("k"), []byte("v2"), 0)
	})
	if err != nil || runs != 2 || during == nil {
		t.Fatalf("Update = %v after %d runs (a View during the second: %t); want a conflict, then a commit alone", err, runs, during != nil)
	}
	if wantValue(t, s, "k", "v2") == during {
		t.Error("a View after the Update read the snapshot begun before its commit")
	}
}

// TestSharedSnapshotSeesExpiry: a record expires while the snapshot that read
// it is still shared (no commit since): Badger checks expiry at each read.
func TestSharedSnapshotSeesExpiry(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	set(t, s, "short", "v", time.Second)
	snap := viewTxn(t, s)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		if viewErr := s.View(t.Context(), func(tx storage.Txn) error {
			if tx.(*txn).btx != snap {
				return errors.New("the snapshot changed with no commit")
			}
			_, err = tx.Get([]byte("short"))
			return nil
		}); viewErr != nil {
			t.Fatal(viewErr)
		}
		if errors.Is(err, storage.ErrNotFound) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("a record set to expire after 1s is still read 10s later through the shared snapshot")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSharedSnapshotConcurrentReads: readers Get and iterate side by side in
// shared snapshots while writers commit, each writer reading its own write back
// at once (so no View after an Update reads a snapshot from before it). Run
// under the race detector (CI does) it also checks that Badger's read-only
// transactions bear concurrent reads.
func TestSharedSnapshotConcurrentReads(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	const writers, readers, rounds = 3, 4, 200
	for w := range writers {
		set(t, s, "w/"+strconv.Itoa(w), "0", 0)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, writers+readers)
	for range readers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := s.View(t.Context(), func(tx storage.Txn) error {
					if _, err := tx.Get([]byte("w/0")); err != nil {
						return err
					}
					n := 0
					err := tx.Iterate([]byte("w/"), func(_, _ []byte) (bool, error) { n++; return true, nil })
					if err == nil && n != writers {
						err = fmt.Errorf("iterated %d writers' keys, want %d", n, writers)
					}
					return err
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var writing sync.WaitGroup
	for w := range writers {
		writing.Go(func() {
			key := "w/" + strconv.Itoa(w)
			for i := 1; i <= rounds; i++ {
				want := strconv.Itoa(i)
				if err := s.Update(t.Context(), func(tx storage.Txn) error { return tx.Set([]byte(key), []byte(want), 0) }); err != nil {
					errs <- err
					return
				}
				var got []byte
				if err := s.View(t.Context(), func(tx storage.Txn) (err error) { got, err = tx.Get([]byte(key)); return err }); err != nil {
					errs <- err
					return
				}
				if string(got) != want {
					errs <- fmt.Errorf("%s read %q right after its Update wrote %q", key, got, want)
					return
				}
			}
		})
	}
	writing.Wait()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// records is a storage.Exporter of fixed records.
type records []storage.Record

func (rs records) Export(_ context.Context, fn func(storage.Record) error) error {
	for _, r := range rs {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// TestImportRetiresTheSnapshot: a View before a restore does not leave the
// Views after it reading the empty store.
func TestImportRetiresTheSnapshot(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	before := viewTxn(t, s)
	if n, err := s.Import(t.Context(), records{{Key: []byte("restored"), Value: []byte("v")}}); err != nil || n != 1 {
		t.Fatalf("Import = %d, %v; want 1 record", n, err)
	}
	if err := s.View(t.Context(), func(tx storage.Txn) error {
		if tx.(*txn).btx == before {
			return errors.New("the View after Import read the snapshot from before it")
		}
		_, err := tx.Get([]byte("restored"))
		return err
	}); err != nil {
		t.Error(err)
	}
}

// BenchmarkView measures a View that reads one key, present or missing (as an
// unregistered key's lookup is), on every core: alone, and while another
// goroutine commits small synced Updates one after another (a View that begins
// its own transaction then waits for the commit in flight).
func BenchmarkView(b *testing.B) {
	for _, writing := range []bool{false, true} {
		for _, key := range []string{"present", "missing"} {
			b.Run(fmt.Sprintf("key=%s/commits=%t", key, writing), func(b *testing.B) {
				s := open(b, b.TempDir())
				defer s.Close()
				if err := s.Update(b.Context(), func(tx storage.Txn) error { return tx.Set([]byte("present"), []byte("v"), 0) }); err != nil {
					b.Fatal(err)
				}
				stop := make(chan struct{})
				var wg sync.WaitGroup
				if writing {
					wg.Go(func() {
						for i := 0; ; i++ {
							select {
							case <-stop:
								return
							default:
							}
							if err := s.Update(b.Context(), func(tx storage.Txn) error {
								return tx.Set(fmt.Appendf(nil, "w/%d", i), []byte("v"), 0)
							}); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						err := s.View(b.Context(), func(tx storage.Txn) error {
							_, err := tx.Get([]byte(key))
							return err
						})
						if err != nil && !errors.Is(err, storage.ErrNotFound) {
							b.Error(err)
							return
						}
					}
				})
				b.StopTimer()
				close(stop)
				wg.Wait()
			})
		}
	}
}
