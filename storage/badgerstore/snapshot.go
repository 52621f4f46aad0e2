package badgerstore

import (
	"sync"

	"github.com/dgraph-io/badger/v4"
)

// Shared read snapshots.
//
// Beginning and ending a Badger read transaction costs more than a point read in
// it: the oracle's lock, two sends to the read watermark's goroutine, and a wait
// for every commit already numbered to be written (oracle.readTs), which under
// synced writes is a wait for a disk sync. Every View that begins between two
// commits of this store would see the same data, so they share one read
// transaction: the first View after a commit begins it, the next commit retires
// it, and the last View still reading a retired one discards it.
//
// This is exact, not a cache with a bound on staleness: every write to the
// database goes through this Store (Badger locks its directory to one process,
// and Caddy's config generations share one Store), and a commit retires the
// snapshot before its Update returns, so a View that begins after an Update has
// returned reads a transaction begun after that commit. Expiry is not affected:
// Badger compares a record's expiry with the clock at each read.
//
// Badger documents a transaction as not safe for concurrent use; a read-only one
// is, as Badger v4 implements it: Get and NewIterator only read its fields, and
// count iterators atomically (TestSharedSnapshotConcurrentReads runs them side
// by side under the race detector, as CI does).
type snapshots struct {
	mu  sync.Mutex
	cur *snapshot // nil: none begun since the last commit
}

// snapshot is one shared read transaction.
type snapshot struct {
	btx  *badger.Txn
	refs int // Views reading it, plus one while it is current; guarded by snapshots.mu
}

// acquire returns the current snapshot, beginning one if there is none, for a
// View to read until it calls release.
func (ss *snapshots) acquire(db *badger.DB) *snapshot {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.cur == nil {
		// Begun under the lock: Views arriving meanwhile wait for this one rather
		// than each beginning (and waiting for the same commits) on its own.
		ss.cur = &snapshot{btx: db.NewTransaction(false), refs: 1}
	}
	ss.cur.refs++
	return ss.cur
}

// release ends a View's use of sn, discarding it if it was retired and this was
// its last reader.
func (ss *snapshots) release(sn *snapshot) {
	ss.mu.Lock()
	sn.refs--
	last := sn.refs == 0
	ss.mu.Unlock()
	if last {
		sn.btx.Discard()
	}
}

// retire makes the next View begin a new snapshot; the current one is discarded
// once its last reader is done. Every commit calls it before its Update returns,
// whether or not it succeeded (retiring costs little, and so nothing depends on
// what a failed commit wrote).
func (ss *snapshots) retire() {
	ss.mu.Lock()
	sn := ss.cur
	ss.cur = nil
	ss.mu.Unlock()
	if sn != nil {
		ss.release(sn) // the reference it held as the current one
	}
}
