package storage

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"iter"
	"slices"
	"time"
)

// Record is one record of a store with its expiry, as Exporter lists it and Importer
// writes it.
type Record struct {
	Key, Value []byte
	// ExpiresAt is the instant from which the record is expired (no longer live);
	// the zero time means it never expires.
	ExpiresAt time.Time
}

// Exporter is implemented by stores that can list their records together with their
// expiry, which Txn does not tell: for copying a store into another one.
type Exporter interface {
	// Export calls fn with every live record, in ascending byte order of keys, from
	// one consistent snapshot, until fn returns an error, which Export returns
	// unwrapped. The record's slices belong to fn.
	Export(ctx context.Context, fn func(Record) error) error
}

// Importer is implemented by stores that can take records with their absolute
// expiry, for copying a store into another one.
type Importer interface {
	// Import writes every record that src exports into the store, each expiring at
	// its own ExpiresAt, and returns how many it wrote. Records already expired when
	// they are read are not written. The store must hold no record at all (live or,
	// on a backend that still holds them, expired): otherwise Import fails with an
	// error wrapping ErrNotEmpty. It is all or nothing: on any error, src's included,
	// nothing has been written (or what was is removed again).
	Import(ctx context.Context, src Exporter) (int, error)
}

// ErrNotEmpty is wrapped by Importer.Import when the target store already holds
// records.
var ErrNotEmpty = errors.New("storage: the target store is not empty")

// KindComparison is the result of Compare for one kind of record.
type KindComparison struct {
	// Kind is the kind of the records, as the KindFunc given to Compare names it.
	Kind string
	// Source and Target count the records of the kind compared on each side.
	Source, Target int
	// SourceSum and TargetSum are SHA-256 checksums of those records (key, value
	// and expiry, in key order) on each side.
	SourceSum, TargetSum [sha256.Size]byte
	// Expired counts the records left out of the comparison because they are on one
	// side only and expire within the margin (see Compare).
	Expired int
	// FirstDifference is the key of the first record of the kind that is on one
	// side only or differs between the sides; nil when they match.
	FirstDifference []byte
}

// OK reports whether both sides hold the same records of the kind.
func (k KindComparison) OK() bool {
	return k.Source == k.Target && k.SourceSum == k.TargetSum
}

// Comparison is the result of Compare, one entry per kind found on either side, in
// order of kind.
type Comparison []KindComparison

// OK reports whether every kind matches.
func (c Comparison) OK() bool {
	for _, k := range c {
		if !k.OK() {
			return false
		}
	}
	return true
}

// Compare reads src and dst side by side, in key order, and compares them per kind
// of record (as kind names it: the domain's rule, core/records.Kind):
// how many records, and a SHA-256 checksum over their keys, values and expiry
// instants in key order.
//
// A record can expire while the stores are read: each store decides what is live by
// its own clock at its own moment (a PostgreSQL snapshot at the start of its
// transaction, Badger as it iterates). So a record found on one side only is left out
// of the comparison when it expires no later than margin after the moment Compare
// meets it (margin covers clock differences between this machine and a database
// server). Every other record counts: one on one side only makes the counts differ,
// and one whose value or expiry differs makes the checksums differ. A record on both
// sides always counts, so a copy with wrong expiry instants does not match.
func Compare(ctx context.Context, src, dst Exporter, margin time.Duration, kind KindFunc) (Comparison, error) {
	nextSrc, stopSrc, errSrc := pull(ctx, src, "the source")
	defer stopSrc()
	nextDst, stopDst, errDst := pull(ctx, dst, "the target")
	defer stopDst()

	kinds := map[string]*kindSums{}
	sums := func(key []byte) *kindSums {
		k := kind(key)
		ks := kinds[k]
		if ks == nil {
			ks = &kindSums{KindComparison: KindComparison{Kind: k}, src: sha256.New(), dst: sha256.New()}
			kinds[k] = ks
		}
		return ks
	}
	// oneSided counts r, found on one side only, unless it expires within margin.
	oneSided := func(r Record, h func(*kindSums) (hash.Hash, *int)) {
		ks := sums(r.Key)
		if !r.ExpiresAt.IsZero() && !r.ExpiresAt.After(time.Now().Add(margin)) {
			ks.Expired++
			return
		}
		sum, n := h(ks)
		writeRecord(sum, r)
		*n++
		ks.differs(r.Key)
	}
	srcSide := func(ks *kindSums) (hash.Hash, *int) { return ks.src, &ks.Source }
	dstSide := func(ks *kindSums) (hash.Hash, *int) { return ks.dst, &ks.Target }

	a, okA := nextSrc()
	b, okB := nextDst()
	for okA || okB {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		switch c := compareKeys(a, okA, b, okB); {
		case c < 0:
			oneSided(a, srcSide)
			a, okA = nextSrc()
		case c > 0:
			oneSided(b, dstSide)
			b, okB = nextDst()
		default:
			ks := sums(a.Key)
			writeRecord(ks.src, a)
			writeRecord(ks.dst, b)
			ks.Source++
			ks.Target++
			if !bytes.Equal(a.Value, b.Value) || !a.ExpiresAt.Equal(b.ExpiresAt) {
				ks.differs(a.Key)
			}
			a, okA = nextSrc()
			b, okB = nextDst()
		}
	}
	if err := errors.Join(errSrc(), errDst()); err != nil {
		return nil, err
	}
	out := make(Comparison, 0, len(kinds))
	for _, ks := range kinds {
		ks.src.Sum(ks.SourceSum[:0])
		ks.dst.Sum(ks.TargetSum[:0])
		out = append(out, ks.KindComparison)
	}
	slices.SortFunc(out, func(x, y KindComparison) int { return cmp.Compare(x.Kind, y.Kind) })
	return out, nil
}

// kindSums accumulates the comparison of one kind.
type kindSums struct {
	KindComparison
	src, dst hash.Hash
}

func (ks *kindSums) differs(key []byte) {
	if ks.FirstDifference == nil {
		ks.FirstDifference = bytes.Clone(key)
	}
}

// compareKeys orders the current records of two sorted streams, an exhausted stream
// coming last.
func compareKeys(a Record, okA bool, b Record, okB bool) int {
	switch {
	case !okA:
		return 1
	case !okB:
		return -1
	}
	return bytes.Compare(a.Key, b.Key)
}

// writeRecord feeds r to h unambiguously: the lengths of key and value, then both,
// then the expiry in Unix microseconds (0: never).
func writeRecord(h hash.Hash, r Record) {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], uint64(len(r.Key)))
	h.Write(buf[:])
	h.Write(r.Key)
	binary.BigEndian.PutUint64(buf[:], uint64(len(r.Value)))
	h.Write(buf[:])
	h.Write(r.Value)
	var exp int64
	if !r.ExpiresAt.IsZero() {
		exp = r.ExpiresAt.UnixMicro()
	}
	binary.BigEndian.PutUint64(buf[:], uint64(exp))
	h.Write(buf[:])
}

// errStopped ends an Export whose reader stopped early.
var errStopped = errors.New("storage: export stopped by its reader")

// pull turns e's Export into a pull iterator. err reports the Export's error, naming
// the store, once next has returned false or stop has been called.
func pull(ctx context.Context, e Exporter, name string) (next func() (Record, bool), stop func(), err func() error) {
	var exportErr error
	seq := func(yield func(Record) bool) {
		exportErr = e.Export(ctx, func(r Record) error {
			if !yield(r) {
				return errStopped
			}
			return nil
		})
		if errors.Is(exportErr, errStopped) {
			exportErr = nil
		}
	}
	next, stop = iter.Pull(iter.Seq[Record](seq))
	return next, stop, func() error {
		if exportErr != nil {
			return fmt.Errorf("reading %s: %w", name, exportErr)
		}
		return nil
	}
}
