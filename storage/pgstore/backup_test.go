package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/pgtest"
	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/badgerstore"
)

// TestBackupRestore backs a PostgreSQL store up and restores it into another
// database: the same records with the same expiry instants. A backup that turns out
// damaged only during the import (its checksum, after every record was sent) leaves
// the target without a row.
func TestBackupRestore(t *testing.T) {
	ctx := context.Background()
	src := closeT(t, openT(t, config(t, pgtest.DSN(t))))
	if err := src.Update(ctx, func(txn storage.Txn) error {
		for i := range importBatch + 5 { // more than one COPY batch on restore
			var ttl time.Duration
			if i%2 == 0 {
				ttl = time.Hour
			}
			if err := txn.Set(fmt.Appendf(nil, "b/k/%05d", i), fmt.Appendf(nil, "v%d", i), ttl); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	sum, err := storage.WriteBackup(ctx, &buf, src, storage.BackupHeader{Backend: "postgres", Created: time.Now()})
	if err != nil || sum.Records != importBatch+5 {
		t.Fatalf("WriteBackup: %d records, %v", sum.Records, err)
	}
	good := buf.Bytes()

	dsn := pgtest.DSN(t)
	dst := closeT(t, openT(t, config(t, dsn)))
	altered := bytes.Clone(good)
	altered[len(altered)-1] ^= 1
	if _, _, err := storage.RestoreBackup(ctx, dst, &swapped{first: good, second: altered}); !errors.Is(err, storage.ErrBadBackup) {
		t.Fatalf("RestoreBackup of a backup altered after it verified: %v, want ErrBadBackup", err)
	}
	if rows := table(t, dsn); len(rows) != 0 {
		t.Fatalf("the refused restore left %d rows", len(rows))
	}
	if _, n, err := storage.RestoreBackup(ctx, dst, bytes.NewReader(good)); err != nil || n != importBatch+5 {
		t.Fatalf("RestoreBackup: %d, %v", n, err)
	}
	want, got := exportAll(t, src), exportAll(t, dst)
	if len(got) != len(want) {
		t.Fatalf("%d records restored, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i].Key, want[i].Key) || !bytes.Equal(got[i].Value, want[i].Value) || !got[i].ExpiresAt.Equal(want[i].ExpiresAt) {
			t.Fatalf("record %d: %q=%q@%v, want %q=%q@%v", i, got[i].Key, got[i].Value, got[i].ExpiresAt,
				want[i].Key, want[i].Value, want[i].ExpiresAt)
		}
	}
}

// TestBackupAcrossBackends: a PostgreSQL backup restores onto Badger, and that
// Badger store's backup onto PostgreSQL: the same records, expiry instants within
// Badger's whole second.
func TestBackupAcrossBackends(t *testing.T) {
	ctx := context.Background()
	src := closeT(t, openT(t, config(t, pgtest.DSN(t))))
	if err := src.Update(ctx, func(txn storage.Txn) error {
		for i := range 20 {
			if err := txn.Set(fmt.Appendf(nil, "x/k/%02d", i), []byte{byte(i)}, time.Duration(i%2)*time.Hour); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	backup := func(e storage.Exporter) []byte {
		var buf bytes.Buffer
		if _, err := storage.WriteBackup(ctx, &buf, e, storage.BackupHeader{}); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	bs, err := badgerstore.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	if _, n, err := storage.RestoreBackup(ctx, bs, bytes.NewReader(backup(src))); err != nil || n != 20 {
		t.Fatalf("PostgreSQL to Badger: %d, %v", n, err)
	}
	dst := closeT(t, openT(t, config(t, pgtest.DSN(t))))
	if _, n, err := storage.RestoreBackup(ctx, dst, bytes.NewReader(backup(bs))); err != nil || n != 20 {
		t.Fatalf("Badger to PostgreSQL: %d, %v", n, err)
	}
	want, got := exportAll(t, src), exportAll(t, dst)
	for i := range want {
		if !bytes.Equal(got[i].Key, want[i].Key) || !bytes.Equal(got[i].Value, want[i].Value) ||
			got[i].ExpiresAt.IsZero() != want[i].ExpiresAt.IsZero() || got[i].ExpiresAt.Sub(want[i].ExpiresAt).Abs() > time.Second {
			t.Errorf("record %d: %q=%q@%v, want %q=%q@%v", i, got[i].Key, got[i].Value, got[i].ExpiresAt,
				want[i].Key, want[i].Value, want[i].ExpiresAt)
		}
	}
}

// swapped serves first until it is rewound, then second.
type swapped struct {
	first, second []byte
	r             *bytes.Reader
}

func (s *swapped) Read(p []byte) (int, error) {
	if s.r == nil {
		s.r = bytes.NewReader(s.first)
	}
	return s.r.Read(p)
}

func (s *swapped) Seek(off int64, whence int) (int64, error) {
	s.r = bytes.NewReader(s.second)
	return s.r.Seek(off, whence)
}
