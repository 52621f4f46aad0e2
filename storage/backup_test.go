package storage_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/badgerstore"
	"github.com/palmgate/palmgate/storage/memstore"
)

// backupStore is a store a backup is taken from and restored into.
type backupStore interface {
	storage.Store
	storage.Exporter
	storage.Importer
}

// backupBackends opens a new, empty store of each kind restore supports here.
var backupBackends = []struct {
	name string
	open func(t *testing.T) backupStore
}{
	{"memstore", func(t *testing.T) backupStore {
		s := memstore.New()
		t.Cleanup(func() { s.Close() })
		return s
	}},
	{"badger", func(t *testing.T) backupStore {
		s, err := badgerstore.Open(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}},
}

// fillForBackup writes records of every shape: no expiry, an expiry, an empty value,
// binary keys and values.
func fillForBackup(t *testing.T, s storage.Store, n int) {
	t.Helper()
	err := s.Update(context.Background(), func(txn storage.Txn) error {
		for i := range n {
			var ttl time.Duration
			if i%3 == 1 {
				ttl = time.Duration(i+1) * time.Hour
			}
			value := []byte(fmt.Sprintf(`{"n":%d}`, i))
			if i%5 == 4 {
				value = []byte{}
			}
			if i%7 == 6 {
				value = []byte{0, 0xff, byte(i), '\n'}
			}
			if err := txn.Set([]byte(fmt.Sprintf("kind/%c/%03d\x00\xfe", 'a'+i%4, i)), value, ttl); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// exported lists what e exports.
func exported(t *testing.T, e storage.Exporter) []storage.Record {
	t.Helper()
	var out []storage.Record
	if err := e.Export(context.Background(), func(r storage.Record) error {
		out = append(out, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// expectSameRecords expects the same keys and values, and expiries that agree within
// a second (Badger keeps whole seconds, rounded up).
func expectSameRecords(t *testing.T, got, want []storage.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) {
			t.Errorf("record %d: %q=%q, want %q=%q", i, g.Key, g.Value, w.Key, w.Value)
		}
		if g.ExpiresAt.IsZero() != w.ExpiresAt.IsZero() || g.ExpiresAt.Sub(w.ExpiresAt).Abs() > time.Second {
			t.Errorf("record %q expires at %v, want %v", g.Key, g.ExpiresAt, w.ExpiresAt)
		}
	}
}

func expectEmpty(t *testing.T, s storage.Store, why string) {
	t.Helper()
	n := 0
	if err := s.View(context.Background(), func(txn storage.Txn) error {
		return txn.IterateKeys(nil, func([]byte) (bool, error) { n++; return true, nil })
	}); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%s: the target holds %d records, want none", why, n)
	}
}

func backupOf(t *testing.T, src storage.Exporter) ([]byte, storage.BackupSummary) {
	t.Helper()
	var buf bytes.Buffer
	header := storage.BackupHeader{Palmgate: "v1.2.3", Created: time.Now().UTC().Truncate(time.Millisecond), Backend: "test"}
	sum, err := storage.WriteBackup(context.Background(), &buf, src, header)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), sum
}

func TestBackupRoundTrip(t *testing.T) {
	for _, from := range backupBackends {
		for _, to := range backupBackends {
			t.Run(from.name+" to "+to.name, func(t *testing.T) {
				src := from.open(t)
				fillForBackup(t, src, 50)
				// An expired record is not backed up.
				if err := src.Update(context.Background(), func(txn storage.Txn) error {
					return txn.Set([]byte("kind/gone/x"), []byte("x"), time.Nanosecond)
				}); err != nil {
					t.Fatal(err)
				}
				for deadline := time.Now().Add(10 * time.Second); ; { // Badger's expiry has whole seconds
					_, err := storage.ReadKey(context.Background(), src, []byte("kind/gone/x"))
					if errors.Is(err, storage.ErrNotFound) {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("the 1ns record has not expired: %v", err)
					}
					time.Sleep(20 * time.Millisecond)
				}
				file, sum := backupOf(t, src)
				if sum.Records != 50 {
					t.Errorf("WriteBackup: %d records, want 50", sum.Records)
				}
				got, err := storage.VerifyBackup(context.Background(), bytes.NewReader(file))
				if err != nil {
					t.Fatalf("VerifyBackup: %v", err)
				}
				if got.Records != 50 || got.Header != sum.Header || got.SHA256 != sum.SHA256 || got.Format != storage.BackupFormat {
					t.Errorf("VerifyBackup: %+v, want %+v", got, sum)
				}
				if !bytes.HasPrefix(file, []byte("palmgate-backup\n\x00\x00\x00\x01")) {
					t.Errorf("the file starts with %q", file[:20])
				}
				if s := sha256.Sum256(file[:len(file)-sha256.Size]); !bytes.Equal(s[:], file[len(file)-sha256.Size:]) {
					t.Errorf("the trailer is not the SHA-256 of the rest of the file")
				}

				dst := to.open(t)
				rsum, n, err := storage.RestoreBackup(context.Background(), dst, bytes.NewReader(file))
				if err != nil {
					t.Fatalf("RestoreBackup: %v", err)
				}
				if n != 50 || rsum.Records != 50 {
					t.Errorf("RestoreBackup wrote %d of %d records, want 50", n, rsum.Records)
				}
				expectSameRecords(t, exported(t, dst), exported(t, src))

				// A second restore into the now full store is refused and changes nothing.
				before := exported(t, dst)
				_, _, err = storage.RestoreBackup(context.Background(), dst, bytes.NewReader(file))
				if !errors.Is(err, storage.ErrNotEmpty) {
					t.Errorf("restore into a non-empty store: %v, want ErrNotEmpty", err)
				}
				expectSameRecords(t, exported(t, dst), before)
			})
		}
	}
}

func TestBackupEmptyStore(t *testing.T) {
	file, sum := backupOf(t, memstore.New())
	if sum.Records != 0 {
		t.Fatalf("%d records", sum.Records)
	}
	dst := memstore.New()
	if _, n, err := storage.RestoreBackup(context.Background(), dst, bytes.NewReader(file)); err != nil || n != 0 {
		t.Fatalf("restoring an empty backup: %d, %v", n, err)
	}
}

// withChecksum replaces the trailer's checksum with the right one for the rest.
func withChecksum(file []byte) []byte {
	out := bytes.Clone(file)
	s := sha256.Sum256(out[:len(out)-sha256.Size])
	copy(out[len(out)-sha256.Size:], s[:])
	return out
}

// damagedBackups returns a valid backup and named damaged versions of it: truncated at
// every byte (so at every record boundary and inside every record), each byte
// altered, a wrong format version, a count that lies, data appended.
func damagedBackups(t *testing.T) (good []byte, bad map[string][]byte) {
	t.Helper()
	src := memstore.New()
	fillForBackup(t, src, 8)
	good, _ = backupOf(t, src)
	bad = map[string][]byte{}
	for n := range len(good) {
		bad[fmt.Sprintf("truncated to %d bytes", n)] = good[:n]
	}
	for i := range good {
		altered := bytes.Clone(good)
		altered[i] ^= 0x20
		bad[fmt.Sprintf("byte %d altered", i)] = altered
	}
	v2 := bytes.Clone(good)
	binary.BigEndian.PutUint32(v2[16:20], 2)
	bad["format version 2"] = withChecksum(v2)
	lying := bytes.Clone(good)
	countAt := len(lying) - sha256.Size - 8
	binary.BigEndian.PutUint64(lying[countAt:], 7)
	bad["count 7 of 8"] = withChecksum(lying)
	bad["data appended"] = append(bytes.Clone(good), 'R')
	bad["not a backup"] = []byte("PGDMP\x01\x0e\x00 a pg_dump file, say")
	return good, bad
}

func TestBackupDamagedIsRefused(t *testing.T) {
	good, bad := damagedBackups(t)
	if _, err := storage.VerifyBackup(context.Background(), bytes.NewReader(good)); err != nil {
		t.Fatalf("the good backup: %v", err)
	}
	dst := memstore.New()
	for name, file := range bad {
		_, err := storage.VerifyBackup(context.Background(), bytes.NewReader(file))
		if !errors.Is(err, storage.ErrBadBackup) {
			t.Errorf("%s: VerifyBackup: %v, want ErrBadBackup", name, err)
		}
		_, n, err := storage.RestoreBackup(context.Background(), dst, bytes.NewReader(file))
		if !errors.Is(err, storage.ErrBadBackup) || n != 0 {
			t.Errorf("%s: RestoreBackup: %d, %v, want ErrBadBackup", name, n, err)
		}
		expectEmpty(t, dst, name)
	}
	value := bytes.Index(good, []byte(`"n":0`))
	if _, err := storage.VerifyBackup(context.Background(), bytes.NewReader(bad[fmt.Sprintf("byte %d altered", value)])); err == nil ||
		!strings.Contains(err.Error(), "checksum does not match") {
		t.Errorf("a value's byte altered: %v, want a checksum mismatch", err)
	}
	for name, want := range map[string]string{
		"format version 2":       "format version 2, newer than this palmgate reads backup format version 1",
		"count 7 of 8":           "the trailer counts 7 records, the file holds 8",
		"data appended":          "data follows the end",
		"not a backup":           "not a palmgate backup",
		"truncated to 100 bytes": "truncated at byte 100",
	} {
		if _, err := storage.VerifyBackup(context.Background(), bytes.NewReader(bad[name])); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, want)
		}
	}
}

// changingFile serves one content on the first read pass and another after a Seek: a
// backup file replaced between RestoreBackup's verification and its import.
type changingFile struct {
	first, second []byte
	r             *bytes.Reader
	seeks         int
}

func (c *changingFile) Read(p []byte) (int, error) {
	if c.r == nil {
		c.r = bytes.NewReader(c.first)
	}
	return c.r.Read(p)
}

func (c *changingFile) Seek(off int64, whence int) (int64, error) {
	c.seeks++
	c.r = bytes.NewReader(c.second)
	return c.r.Seek(off, whence)
}

var _ io.ReadSeeker = (*changingFile)(nil)

// TestBackupDamagedDuringImport damages the backup after it verified: the import
// itself finds the damage, and the target is left empty, on every backend, including
// a Badger import too large for one transaction.
func TestBackupDamagedDuringImport(t *testing.T) {
	good, bad := damagedBackups(t)
	for _, b := range backupBackends {
		t.Run(b.name, func(t *testing.T) {
			dst := b.open(t)
			for name, file := range bad {
				f := &changingFile{first: good, second: file}
				_, n, err := storage.RestoreBackup(context.Background(), dst, f)
				if !errors.Is(err, storage.ErrBadBackup) || n != 0 || f.seeks != 1 {
					t.Errorf("%s: RestoreBackup: %d, %v (%d seeks), want ErrBadBackup", name, n, err, f.seeks)
				}
				expectEmpty(t, dst, name)
			}
		})
	}
	t.Run("badger, many transactions", func(t *testing.T) {
		src := memstore.New()
		big := bytes.Repeat([]byte("v"), 64<<10)
		if err := src.Update(context.Background(), func(txn storage.Txn) error {
			for i := range 200 { // 12.8 MiB: several Badger transactions
				if err := txn.Set([]byte(fmt.Sprintf("big/%04d", i)), big, 0); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		good, _ := backupOf(t, src)
		altered := bytes.Clone(good)
		altered[len(altered)-1] ^= 1 // the checksum: found after every record was written
		dst := backupBackends[1].open(t)
		_, _, err := storage.RestoreBackup(context.Background(), dst, &changingFile{first: good, second: altered})
		if !errors.Is(err, storage.ErrBadBackup) {
			t.Fatalf("RestoreBackup: %v, want ErrBadBackup", err)
		}
		expectEmpty(t, dst, "after a failed import of 200 records")
		// The store is still usable: the good backup restores.
		if _, n, err := storage.RestoreBackup(context.Background(), dst, bytes.NewReader(good)); err != nil || n != 200 {
			t.Fatalf("RestoreBackup of the good backup: %d, %v", n, err)
		}
		expectSameRecords(t, exported(t, dst), exported(t, src))
	})
}

// TestBackupOversizedLength: a length field beyond the limits is refused before
// anything that large is allocated.
func TestBackupOversizedLength(t *testing.T) {
	src := memstore.New()
	fillForBackup(t, src, 1)
	good, _ := backupOf(t, src)
	headerLen := binary.BigEndian.Uint32(good[20:24])
	keyLenAt := 24 + int(headerLen) + 1
	bad := bytes.Clone(good)
	binary.BigEndian.PutUint32(bad[keyLenAt:], 0xffffffff)
	_, err := storage.VerifyBackup(context.Background(), bytes.NewReader(bad))
	if err == nil || !strings.Contains(err.Error(), "exceeds the limit") {
		t.Fatalf("VerifyBackup: %v, want a length over the limit", err)
	}
}

// TestBackupSourceFails: an Export that fails leaves a file without a trailer, which
// is refused.
func TestBackupSourceFails(t *testing.T) {
	var buf bytes.Buffer
	boom := errors.New("connection lost")
	_, err := storage.WriteBackup(context.Background(), &buf, failing{records{rec("a", "1", time.Time{})}, boom}, storage.BackupHeader{})
	if !errors.Is(err, boom) {
		t.Fatalf("WriteBackup: %v, want %v", err, boom)
	}
	if _, err := storage.VerifyBackup(context.Background(), bytes.NewReader(buf.Bytes())); !errors.Is(err, storage.ErrBadBackup) {
		t.Fatalf("VerifyBackup of the incomplete file: %v, want ErrBadBackup", err)
	}
}

// TestBackupWithKey: a backup made with a key ends with an HMAC-SHA256 under it, and
// reading it with the key refuses whatever a forger without the key can make: the
// file altered with its trailer recomputed as a SHA-256 or an HMAC under another key,
// or a new backup without a key; without the key it is refused too.
func TestBackupWithKey(t *testing.T) {
	ctx := context.Background()
	key := []byte("0123456789abcdef0123456789abcdef")
	keyed := storage.Backup{Key: key}
	src := memstore.New()
	fillForBackup(t, src, 10)
	var buf bytes.Buffer
	sum, err := keyed.Write(ctx, &buf, src, storage.BackupHeader{Palmgate: "v1"})
	if err != nil || sum.Header.MAC != "hmac-sha256" {
		t.Fatalf("Write: %+v, %v", sum, err)
	}
	good := buf.Bytes()
	if got, err := keyed.Verify(ctx, bytes.NewReader(good)); err != nil || got.Records != 10 || got.Header.MAC != "hmac-sha256" {
		t.Fatalf("Verify with the key: %+v, %v", got, err)
	}
	dst := memstore.New()
	if _, n, err := keyed.Restore(ctx, dst, bytes.NewReader(good)); err != nil || n != 10 {
		t.Fatalf("Restore with the key: %d, %v", n, err)
	}
	expectSameRecords(t, exported(t, dst), exported(t, src))

	// What a forger makes: the records with one value changed, written anew.
	altered := memstore.New()
	fillForBackup(t, altered, 10)
	if err := altered.Update(ctx, func(txn storage.Txn) error {
		return txn.Set([]byte("kind/a/000\x00\xfe"), []byte(`{"n":"forged"}`), 0)
	}); err != nil {
		t.Fatal(err)
	}
	rewrite := func(b storage.Backup, mac string) []byte {
		var out bytes.Buffer
		if _, err := b.Write(ctx, &out, altered, storage.BackupHeader{Palmgate: "v1"}); err != nil {
			t.Fatal(err)
		}
		file := out.Bytes()
		if mac != "" { // an unkeyed file claiming a MAC: the SHA-256 recomputed under the header
			file = bytes.Replace(file, []byte(`"palmgate":"v1"`), []byte(`"palmgate":"v1","mac":"hmac-sha256"`), 1)
			binary.BigEndian.PutUint32(file[20:24], binary.BigEndian.Uint32(file[20:24])+uint32(len(`,"mac":"hmac-sha256"`)))
			file = withChecksum(file)
		}
		return file
	}
	for name, tc := range map[string]struct {
		file []byte
		with storage.Backup
		want error
	}{
		"read without the key":               {good, storage.Backup{}, storage.ErrBackupKey},
		"read with another key":              {good, storage.Backup{Key: bytes.Repeat([]byte("x"), 32)}, storage.ErrBadBackup},
		"a new backup without a key":         {rewrite(storage.Backup{}, ""), keyed, storage.ErrBackupKey},
		"a SHA-256 trailer claiming an HMAC": {rewrite(storage.Backup{}, "hmac-sha256"), keyed, storage.ErrBadBackup},
		"an HMAC under the forger's key":     {rewrite(storage.Backup{Key: bytes.Repeat([]byte("f"), 32)}, ""), keyed, storage.ErrBadBackup},
		"the good file truncated":            {good[:len(good)-1], keyed, storage.ErrBadBackup},
		"a short key":                        {good, storage.Backup{Key: []byte("short")}, nil},
	} {
		_, err := tc.with.Verify(ctx, bytes.NewReader(tc.file))
		if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
		dst := memstore.New()
		if _, _, err := tc.with.Restore(ctx, dst, bytes.NewReader(tc.file)); err == nil {
			t.Errorf("%s: restored", name)
		}
		expectEmpty(t, dst, name)
	}
}
