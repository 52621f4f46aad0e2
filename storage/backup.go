package storage

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
	"strings"
	"time"
)

// A backup file (format 1) is, in order, with integers big-endian:
//
//	magic     the 16 bytes "palmgate-backup\n"
//	format    uint32, 1
//	header    uint32 length, then that many bytes of JSON (BackupHeader)
//	records   each: the byte 'R', uint32 key length, key, uint32 value length, value,
//	          int64 expiry in Unix microseconds (0: never expires)
//	trailer   the byte 'E', uint64 record count, then the SHA-256 of every byte of
//	          the file before it (magic through the count); in a backup made with
//	          a key (the header's "mac" is "hmac-sha256"), their HMAC-SHA256 under it
//
// and nothing after. The records are a store's live records in ascending key order,
// from one consistent snapshot. The record count is in the trailer, not the header:
// the file is written as the snapshot is read, and the count is known only at the
// end. The checksum detects a damaged or truncated file and naive tampering, not a
// forger who recomputes it; the HMAC of a backup made with a key stops a forger who
// does not hold the key.
const (
	backupMagic = "palmgate-backup\n"
	// BackupFormat is the version of the backup file format this code writes and reads.
	BackupFormat = 1

	tagRecord = 'R'
	tagEnd    = 'E'

	// maxBackupHeader, MaxBackupKey and MaxBackupValue bound what a reader allocates for
	// a length read from a file, which may be damaged.
	maxBackupHeader = 64 << 10
	// MaxBackupKey is the longest key a backup holds (Badger's own limit is 65000 bytes).
	MaxBackupKey = 64 << 10
	// MaxBackupValue is the longest value a backup holds.
	MaxBackupValue = 64 << 20
)

// ErrBadBackup is wrapped by every error about a backup file that is not a complete,
// intact palmgate backup of a format this code reads: damaged, truncated, altered,
// of another format version (a *BackupVersionError, which says so in its own
// words), or not a backup at all.
var ErrBadBackup = errors.New("not a complete, intact palmgate backup")

// BackupFormats are the backup format versions this code reads.
var BackupFormats = []uint32{BackupFormat}

// BackupVersionError refuses a backup of a format version this code does not read:
// one a newer palmgate wrote, or a number no palmgate writes (a damaged file). It
// is found before anything else is read, so before anything is imported. It is
// an ErrBadBackup (errors.Is), but does not call the file damaged.
type BackupVersionError struct {
	// Found is the format version the file names.
	Found uint32
}

// maxPlausibleFormat is the largest format version taken for one a newer palmgate
// wrote; a larger one (or 0) is a number no palmgate writes.
const maxPlausibleFormat = 1 << 10

func (e *BackupVersionError) Error() string {
	reads := make([]string, len(BackupFormats))
	for i, v := range BackupFormats {
		reads[i] = fmt.Sprint(v)
	}
	this := "this palmgate reads backup format version " + strings.Join(reads, ", ")
	if e.Found == 0 || e.Found > maxPlausibleFormat {
		return fmt.Sprintf("the file names backup format version %d, which no palmgate writes (is it damaged?); %s", e.Found, this)
	}
	return fmt.Sprintf("the backup is of format version %d, newer than %s: restore it with a palmgate at least as new as the one that made it", e.Found, this)
}

// Is makes a BackupVersionError an ErrBadBackup.
func (e *BackupVersionError) Is(target error) bool { return target == ErrBadBackup }

// BackupHeader describes a backup; it is written at the start of the file.
type BackupHeader struct {
	// Palmgate is the version of palmgate that wrote the backup.
	Palmgate string `json:"palmgate"`
	// Created is when the backup's snapshot was taken.
	Created time.Time `json:"created"`
	// Backend names the kind of store backed up ("badger", "postgres").
	Backend string `json:"backend,omitempty"`
	// MAC is "hmac-sha256" in a backup made with a key, "" otherwise; Backup.Write
	// sets it.
	MAC string `json:"mac,omitempty"`
}

// macHMACSHA256 is BackupHeader.MAC of a backup made with a key.
const macHMACSHA256 = "hmac-sha256"

// minBackupKey is the shortest key Backup accepts.
const minBackupKey = 16

// Backup writes and reads backup files. The zero value makes and reads backups
// checked by SHA-256 only.
type Backup struct {
	// Key, when not empty (at least 16 bytes), authenticates backups: Write ends the
	// file with an HMAC-SHA256 under Key instead of a SHA-256, and reading refuses a
	// backup without such an HMAC, or with one under another key. Reading a backup
	// made with a key needs the key.
	Key []byte
}

// newHash returns the trailer's hash for a backup whose header names mac.
func (b Backup) newHash(mac string) (hash.Hash, error) {
	if len(b.Key) > 0 && len(b.Key) < minBackupKey {
		return nil, fmt.Errorf("backup: the key has %d bytes; at least %d are needed", len(b.Key), minBackupKey)
	}
	switch {
	case mac == macHMACSHA256 && len(b.Key) > 0:
		return hmac.New(sha256.New, b.Key), nil
	case mac == macHMACSHA256:
		return nil, fmt.Errorf("%w: it was made with a key (its trailer is an HMAC-SHA256): give the key", ErrBackupKey)
	case mac != "":
		return nil, fmt.Errorf("%w: unknown mac %.20q in the header", ErrBadBackup, mac)
	case len(b.Key) > 0:
		return nil, fmt.Errorf("%w: it was made without a key, but a key was given (was it replaced?)", ErrBackupKey)
	}
	return sha256.New(), nil
}

// ErrBackupKey is wrapped by the error of reading a backup made with a key without
// the key, or one made without a key with a key.
var ErrBackupKey = errors.New("backup key mismatch")

// BackupSummary describes a complete backup.
type BackupSummary struct {
	Format int
	Header BackupHeader
	// Records is how many records the backup holds.
	Records int
	// SHA256 is the checksum of the trailer (its HMAC-SHA256, in a backup made with
	// a key).
	SHA256 [sha256.Size]byte
}

// WriteBackup is Backup{}.Write: a backup without a key.
func WriteBackup(ctx context.Context, w io.Writer, src Exporter, header BackupHeader) (BackupSummary, error) {
	return Backup{}.Write(ctx, w, src, header)
}

// Write writes a backup of every live record src exports (one consistent snapshot)
// to w, described by header. On an error the file is incomplete: it lacks the
// trailer, and Verify and Restore refuse it.
func (b Backup) Write(ctx context.Context, w io.Writer, src Exporter, header BackupHeader) (BackupSummary, error) {
	header.MAC = ""
	if len(b.Key) > 0 {
		header.MAC = macHMACSHA256
	}
	sum := BackupSummary{Format: BackupFormat, Header: header}
	h, err := b.newHash(header.MAC)
	if err != nil {
		return sum, err
	}
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 64<<10)
	hj, err := json.Marshal(header)
	if err != nil {
		return sum, fmt.Errorf("backup: encoding the header: %w", err)
	}
	var buf [8]byte
	bw.WriteString(backupMagic)
	binary.BigEndian.PutUint32(buf[:4], BackupFormat)
	bw.Write(buf[:4])
	binary.BigEndian.PutUint32(buf[:4], uint32(len(hj)))
	bw.Write(buf[:4])
	bw.Write(hj)
	err = src.Export(ctx, func(r Record) error {
		if len(r.Key) > MaxBackupKey || len(r.Value) > MaxBackupValue {
			// Not the key: it may name something secret (the error is logged).
			return fmt.Errorf("backup: record %d is too large for a backup (key %d bytes, value %d bytes)",
				sum.Records+1, len(r.Key), len(r.Value))
		}
		bw.WriteByte(tagRecord)
		binary.BigEndian.PutUint32(buf[:4], uint32(len(r.Key)))
		bw.Write(buf[:4])
		bw.Write(r.Key)
		binary.BigEndian.PutUint32(buf[:4], uint32(len(r.Value)))
		bw.Write(buf[:4])
		bw.Write(r.Value)
		var exp int64
		if !r.ExpiresAt.IsZero() {
			exp = r.ExpiresAt.UnixMicro()
		}
		binary.BigEndian.PutUint64(buf[:], uint64(exp))
		if _, err := bw.Write(buf[:]); err != nil {
			return fmt.Errorf("backup: writing: %w", err)
		}
		sum.Records++
		return nil
	})
	if err != nil {
		return sum, err
	}
	bw.WriteByte(tagEnd)
	binary.BigEndian.PutUint64(buf[:], uint64(sum.Records))
	bw.Write(buf[:])
	if err := bw.Flush(); err != nil {
		return sum, fmt.Errorf("backup: writing: %w", err)
	}
	h.Sum(sum.SHA256[:0])
	if _, err := w.Write(sum.SHA256[:]); err != nil {
		return sum, fmt.Errorf("backup: writing: %w", err)
	}
	return sum, nil
}

// VerifyBackup is Backup{}.Verify: for a backup without a key.
func VerifyBackup(ctx context.Context, r io.Reader) (BackupSummary, error) {
	return Backup{}.Verify(ctx, r)
}

// Verify reads a whole backup from r and checks it: magic, format version, header,
// the framing of every record, the count and the checksum (or HMAC), and that nothing
// follows the trailer. It holds one record in memory at a time.
func (b Backup) Verify(ctx context.Context, r io.Reader) (BackupSummary, error) {
	return b.read(ctx, r, func(Record) error { return nil })
}

// BackupExporter is Backup{}.Exporter: for a backup without a key.
func BackupExporter(r io.Reader) Exporter { return Backup{}.Exporter(r) }

// Exporter is an Exporter of the records of a backup read from r, for an Importer:
// its Export fails, wrapping ErrBadBackup, when the backup turns out damaged, which
// may be only at its very end (the checksum), so only an all-or-nothing consumer
// should rely on it alone. Export reads r; it can be called once.
func (b Backup) Exporter(r io.Reader) Exporter { return backupExporter{b, r} }

type backupExporter struct {
	b Backup
	r io.Reader
}

func (e backupExporter) Export(ctx context.Context, fn func(Record) error) error {
	_, err := e.b.read(ctx, e.r, fn)
	return err
}

// RestoreBackup restores the backup in r into dst, which must hold no record: it
// first reads the whole backup and verifies it (VerifyBackup) without writing
// anything, then reads it again from the start and imports it, all or nothing
// (Importer.Import), checking it once more on the way (in case the file changed in
// between). A damaged backup is refused with an error wrapping ErrBadBackup, a
// non-empty dst with one wrapping ErrNotEmpty; on any error dst is left as it was.
// It returns the backup's summary and how many records it wrote (records expired by
// now are not).
func RestoreBackup(ctx context.Context, dst Importer, r io.ReadSeeker) (BackupSummary, int, error) {
	return Backup{}.Restore(ctx, dst, r)
}

// Restore is RestoreBackup for backups of b.
func (b Backup) Restore(ctx context.Context, dst Importer, r io.ReadSeeker) (BackupSummary, int, error) {
	sum, err := b.Verify(ctx, r)
	if err != nil {
		return sum, 0, err
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return sum, 0, fmt.Errorf("restore: rewinding the backup: %w", err)
	}
	n, err := dst.Import(ctx, b.Exporter(r))
	if err != nil {
		return sum, 0, err
	}
	return sum, n, nil
}

// backupReader reads a backup, hashing what it reads (keeping it in prefix until
// h is known) and counting its offset.
type backupReader struct {
	r      *bufio.Reader
	h      hash.Hash
	prefix []byte
	off    int64
}

func (br *backupReader) read(p []byte, what string) error {
	n, err := io.ReadFull(br.r, p)
	if br.h != nil {
		br.h.Write(p[:n])
	} else {
		br.prefix = append(br.prefix, p[:n]...)
	}
	br.off += int64(n)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: truncated at byte %d, in %s", ErrBadBackup, br.off, what)
	}
	if err != nil {
		return fmt.Errorf("reading the backup: %w", err)
	}
	return nil
}

func (br *backupReader) uint32(what string) (uint32, error) {
	var b [4]byte
	err := br.read(b[:], what)
	return binary.BigEndian.Uint32(b[:]), err
}

func (br *backupReader) bytes(limit int, what string) ([]byte, error) {
	n, err := br.uint32(what + " length")
	if err != nil {
		return nil, err
	}
	if int64(n) > int64(limit) {
		return nil, fmt.Errorf("%w: %s length %d at byte %d exceeds the limit %d", ErrBadBackup, what, n, br.off-4, limit)
	}
	p := make([]byte, n)
	return p, br.read(p, what)
}

// read reads and checks a backup, calling fn with each record as it is read.
func (b Backup) read(ctx context.Context, r io.Reader, fn func(Record) error) (BackupSummary, error) {
	var sum BackupSummary
	br := &backupReader{r: bufio.NewReaderSize(r, 64<<10)}
	magic := make([]byte, len(backupMagic))
	if err := br.read(magic, "the magic"); err != nil || string(magic) != backupMagic {
		return sum, fmt.Errorf("%w: it does not start with %q (not a palmgate backup)", ErrBadBackup, backupMagic)
	}
	format, err := br.uint32("the format version")
	if err != nil {
		return sum, err
	}
	if !slices.Contains(BackupFormats, format) {
		return sum, &BackupVersionError{Found: format}
	}
	sum.Format = int(format)
	hj, err := br.bytes(maxBackupHeader, "the header")
	if err != nil {
		return sum, err
	}
	if err := json.Unmarshal(hj, &sum.Header); err != nil {
		return sum, fmt.Errorf("%w: the header is not valid JSON: %v", ErrBadBackup, err)
	}
	if br.h, err = b.newHash(sum.Header.MAC); err != nil {
		return sum, err
	}
	br.h.Write(br.prefix)
	var prev []byte
	for {
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		var tag [1]byte
		if err := br.read(tag[:], fmt.Sprintf("the frame after record %d", sum.Records)); err != nil {
			return sum, err
		}
		if tag[0] == tagEnd {
			break
		}
		if tag[0] != tagRecord {
			return sum, fmt.Errorf("%w: unexpected byte 0x%02x at byte %d (after record %d)", ErrBadBackup, tag[0], br.off-1, sum.Records)
		}
		what := fmt.Sprintf("record %d", sum.Records+1)
		key, err := br.bytes(MaxBackupKey, what+"'s key")
		if err != nil {
			return sum, err
		}
		value, err := br.bytes(MaxBackupValue, what+"'s value")
		if err != nil {
			return sum, err
		}
		var eb [8]byte
		if err := br.read(eb[:], what+"'s expiry"); err != nil {
			return sum, err
		}
		if prev != nil && bytes.Compare(key, prev) <= 0 {
			return sum, fmt.Errorf("%w: %s is out of key order", ErrBadBackup, what)
		}
		prev = key
		rec := Record{Key: key, Value: value}
		if exp := int64(binary.BigEndian.Uint64(eb[:])); exp != 0 {
			rec.ExpiresAt = time.UnixMicro(exp)
		}
		sum.Records++
		if err := fn(rec); err != nil {
			return sum, err
		}
	}
	var cb [8]byte
	if err := br.read(cb[:], "the trailer"); err != nil {
		return sum, err
	}
	want := br.h.Sum(nil)
	if _, err := io.ReadFull(br.r, sum.SHA256[:]); err != nil {
		return sum, fmt.Errorf("%w: truncated in the checksum at the end", ErrBadBackup)
	}
	if count := binary.BigEndian.Uint64(cb[:]); count != uint64(sum.Records) {
		return sum, fmt.Errorf("%w: the trailer counts %d records, the file holds %d", ErrBadBackup, count, sum.Records)
	}
	if sum.Header.MAC == macHMACSHA256 && !hmac.Equal(want, sum.SHA256[:]) {
		return sum, fmt.Errorf("%w: the HMAC-SHA256 does not match (the file was damaged or altered, or the key is not the one it was made with)", ErrBadBackup)
	}
	if !bytes.Equal(want, sum.SHA256[:]) {
		return sum, fmt.Errorf("%w: the SHA-256 checksum does not match (the file was damaged or altered)", ErrBadBackup)
	}
	if n, _ := io.ReadFull(br.r, make([]byte, 1)); n > 0 {
		return sum, fmt.Errorf("%w: data follows the end of the backup", ErrBadBackup)
	}
	return sum, nil
}
