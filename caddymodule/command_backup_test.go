package caddymodule

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/badgerstore"
	"github.com/palmgate/palmgate/storage/memstore"
)

func TestParseRestoreArgs(t *testing.T) {
	const dsn = "postgres://u:s3cret@db/palmgate"
	tests := []struct {
		name string
		args []string
		want restoreArgs
		help bool
		err  string
	}{
		{name: "badger", args: []string{"--from", "f.backup", "--storage", "badger", "/var/lib/palmgate"},
			want: restoreArgs{from: "f.backup", target: migrateEnd{"badger", "/var/lib/palmgate"}}},
		{name: "postgres first, json, key", args: []string{"--storage", "postgres", dsn, "--json", "--from", "f", "--key-file", "k"},
			want: restoreArgs{from: "f", keyFile: "k", target: migrateEnd{"postgres", dsn}, asJSON: true}},
		{name: "flag=value", args: []string{"--from=f", "--key-file=k", "--storage=postgres", "{env.PALMGATE_DSN}"},
			want: restoreArgs{from: "f", keyFile: "k", target: migrateEnd{"postgres", "{env.PALMGATE_DSN}"}}},
		{name: "no key file", args: []string{"--from", "f", "--key-file", "--storage", "badger", "d"}, err: "--key-file needs a file"},
		{name: "help", args: []string{"--from", "--help"}, help: true},
		{name: "nothing", err: "both --from and --storage are required"},
		{name: "no --storage", args: []string{"--from", "f"}, err: "both --from and --storage are required"},
		{name: "no file", args: []string{"--from", "--storage", "badger", "d"}, err: "--from needs a file"},
		{name: "location missing", args: []string{"--from", "f", "--storage", "postgres"}, err: "--storage needs a backend and a location"},
		{name: "twice", args: []string{"--from", "f", "--from", "g"}, err: "--from given twice"},
		{name: "unknown flag", args: []string{"--to", "f"}, err: `unknown flag "--to"`},
		{name: "stray argument", args: []string{"--from", "f", dsn}, err: "unexpected argument 3"},
		{name: "unknown backend", args: []string{"--from", "f", "--storage", "mysql", dsn}, err: `--storage "mysql": unknown backend`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, help, err := parseRestoreArgs(tt.args)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("the error repeats the DSN's password: %v", err)
				}
				return
			}
			if err != nil || help != tt.help || got != tt.want {
				t.Fatalf("got %+v help=%t %v, want %+v help=%t", got, help, err, tt.want, tt.help)
			}
		})
	}
}

// TestRunRestore restores into a new Badger directory; a damaged file is refused
// before the target is even opened (no directory is created), and a second restore
// into the now full store is refused.
func TestRunRestore(t *testing.T) {
	ctx := context.Background()
	src := memstore.New()
	if err := src.Update(ctx, func(txn storage.Txn) error {
		if err := txn.Set([]byte("keys/active/RS256"), []byte("k"), 0); err != nil {
			return err
		}
		return txn.Set([]byte("oidc/code/x"), []byte("c"), time.Hour)
	}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := storage.WriteBackup(ctx, &buf, src, storage.BackupHeader{Palmgate: "test"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "good.backup")
	bad := filepath.Join(dir, "bad.backup")
	if err := os.WriteFile(good, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, buf.Bytes()[:buf.Len()-1], 0o600); err != nil {
		t.Fatal(err)
	}
	target := migrateEnd{"badger", filepath.Join(dir, "store")}

	_, err := runRestore(ctx, bad, target, storage.Backup{})
	if err == nil || !strings.Contains(err.Error(), "refusing to restore") || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("restoring a truncated file: %v, want a refusal saying it is truncated", err)
	}
	if _, err := os.Stat(target.location); !os.IsNotExist(err) {
		t.Fatalf("the refused restore created the target directory (%v)", err)
	}
	report, err := runRestore(ctx, good, target, storage.Backup{})
	if err != nil {
		t.Fatal(err)
	}
	if report.Records != 2 || report.Restored == nil || *report.Restored != 2 || report.Palmgate != "test" {
		t.Errorf("report %+v, want 2 records restored", report)
	}
	_, err = runRestore(ctx, good, target, storage.Backup{})
	if err == nil || !strings.Contains(err.Error(), "already holds palmgate records") {
		t.Errorf("a second restore: %v, want a refusal", err)
	}
	s, err := badgerstore.Open(target.location, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	counts, err := storage.CountByKind(ctx, s, func(k []byte) string { return string(k) })
	if err != nil || len(counts) != 2 {
		t.Errorf("the restored store holds %v (%v), want the 2 records", counts, err)
	}

	// A directory with files but no Badger store is refused.
	if _, err := runRestore(ctx, good, migrateEnd{"badger", dir}, storage.Backup{}); err == nil || !strings.Contains(err.Error(), "no Badger store") {
		t.Errorf("restoring into a directory of other files: %v", err)
	}
}

// TestRunRestoreWithKey: a backup made with a key restores with it only; the key
// file is read trimmed, and a short one is refused without showing it.
func TestRunRestoreWithKey(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "backup.key")
	if err := os.WriteFile(keyFile, []byte("c2VjcmV0LWtleS1vZi10aGUtYmFja3Vwcw==\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := readBackupKey(keyFile)
	if err != nil || string(key) != "c2VjcmV0LWtleS1vZi10aGUtYmFja3Vwcw==" {
		t.Fatalf("readBackupKey: %q, %v", key, err)
	}
	short := filepath.Join(dir, "short.key")
	if err := os.WriteFile(short, []byte("tiny-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readBackupKey(short); err == nil || strings.Contains(err.Error(), "tiny-secret") || !strings.Contains(err.Error(), "at least 16") {
		t.Errorf("a short key: %v", err)
	}
	src := memstore.New()
	if err := src.Update(ctx, func(txn storage.Txn) error { return txn.Set([]byte("keys/a/b"), []byte("k"), 0) }); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := (storage.Backup{Key: key}).Write(ctx, &buf, src, storage.BackupHeader{}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "keyed.backup")
	if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	target := migrateEnd{"badger", filepath.Join(dir, "store")}
	if _, err := runRestore(ctx, file, target, storage.Backup{}); err == nil || !strings.Contains(err.Error(), "give the key") {
		t.Errorf("restoring a keyed backup without the key: %v", err)
	}
	if _, err := runRestore(ctx, file, target, storage.Backup{Key: []byte("another key, long enough")}); err == nil || !strings.Contains(err.Error(), "HMAC-SHA256 does not match") {
		t.Errorf("restoring a keyed backup with another key: %v", err)
	}
	if _, err := os.Stat(target.location); !os.IsNotExist(err) {
		t.Fatalf("a refused restore created the target (%v)", err)
	}
	if report, err := runRestore(ctx, file, target, storage.Backup{Key: key}); err != nil || *report.Restored != 1 {
		t.Fatalf("restoring with the key: %+v, %v", report, err)
	}
}

// TestRunRestoreNewerFormat: a backup of a format version this build does not
// read is refused before the target is opened, in words that name the version
// found and the versions read (and do not call it damaged).
func TestRunRestoreNewerFormat(t *testing.T) {
	ctx := context.Background()
	src := memstore.New()
	if err := src.Update(ctx, func(txn storage.Txn) error { return txn.Set([]byte("keys/a/b"), []byte("k"), 0) }); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := storage.WriteBackup(ctx, &buf, src, storage.BackupHeader{Palmgate: "test"}); err != nil {
		t.Fatal(err)
	}
	file := buf.Bytes()
	binary.BigEndian.PutUint32(file[16:20], 2) // what a newer palmgate would write
	sum := sha256.Sum256(file[:len(file)-sha256.Size])
	copy(file[len(file)-sha256.Size:], sum[:])
	dir := t.TempDir()
	path := filepath.Join(dir, "newer.backup")
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	target := migrateEnd{"badger", filepath.Join(dir, "store")}
	_, err := runRestore(ctx, path, target, storage.Backup{})
	if err == nil {
		t.Fatal("a backup of format version 2 was restored")
	}
	for _, want := range []string{"refusing to restore", "nothing was written", "format version 2", "reads backup format version 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("restore: %q, want it to say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "intact") {
		t.Errorf("restore: %q calls a newer backup damaged", err)
	}
	if _, err := os.Stat(target.location); !os.IsNotExist(err) {
		t.Fatalf("the refused restore created the target directory (%v)", err)
	}
}
