package storage_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/memstore"
)

// withFormat is file (a backup without a key) naming format version v, its
// checksum recomputed: what a newer palmgate would write.
func withFormat(file []byte, v uint32) []byte {
	out := bytes.Clone(file)
	binary.BigEndian.PutUint32(out[16:20], v)
	return withChecksum(out)
}

// TestBackupFormatVersion: a backup of a format version this build does not read
// is refused as such (a *BackupVersionError naming the version found and the ones
// read, not "damaged"), before anything is imported, with or without a key.
func TestBackupFormatVersion(t *testing.T) {
	ctx := context.Background()
	src := memstore.New()
	fillForBackup(t, src, 3)
	good, _ := backupOf(t, src)
	for _, tc := range []struct {
		name  string
		v     uint32
		words []string
	}{
		{"newer", 2, []string{"format version 2, newer than this palmgate reads backup format version 1", "at least as new"}},
		{"much newer", 1000, []string{"format version 1000, newer"}},
		{"zero", 0, []string{"format version 0, which no palmgate writes", "reads backup format version 1"}},
		{"absurd", 0xdeadbeef, []string{"format version 3735928559, which no palmgate writes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := withFormat(good, tc.v)
			for _, b := range []storage.Backup{{}, {Key: bytes.Repeat([]byte("k"), 32)}} {
				dst := memstore.New()
				_, n, err := b.Restore(ctx, dst, bytes.NewReader(file))
				var ve *storage.BackupVersionError
				if !errors.As(err, &ve) || ve.Found != tc.v || !errors.Is(err, storage.ErrBadBackup) || n != 0 {
					t.Fatalf("Restore: %d, %v; want a BackupVersionError for %d", n, err, tc.v)
				}
				for _, w := range tc.words {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("Restore: %q, want it to say %q", err, w)
					}
				}
				if strings.Contains(err.Error(), "intact") {
					t.Errorf("Restore: %q calls a backup of another version damaged", err)
				}
				expectEmpty(t, dst, tc.name)
			}
		})
	}
}
