package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/pgtest"
	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/badgerstore"
)

// records is an Exporter over a sorted slice; err, when set, ends the export after
// the records.
type records struct {
	rs  []storage.Record
	err error
}

func (e records) Export(ctx context.Context, fn func(storage.Record) error) error {
	for _, r := range e.rs {
		if err := fn(r); err != nil {
			return err
		}
	}
	return e.err
}

// table reads every row of palmgate_kv, expired ones included, as "key=value@expiry".
func table(t *testing.T, dsn string) []string {
	t.Helper()
	rows, err := sqlConn(t, dsn).Query(context.Background(), `SELECT key, value, expires_at FROM palmgate_kv ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k, v []byte
		var exp *time.Time
		if err := rows.Scan(&k, &v, &exp); err != nil {
			t.Fatal(err)
		}
		e := "never"
		if exp != nil {
			e = exp.UTC().Format(time.RFC3339Nano)
		}
		out = append(out, fmt.Sprintf("%q=%q@%s", k, v, e))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func exportAll(t *testing.T, e storage.Exporter) []storage.Record {
	t.Helper()
	var got []storage.Record
	if err := e.Export(context.Background(), func(r storage.Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestImportExport(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := closeT(t, openT(t, config(t, dsn)))
	ctx := context.Background()
	now := time.Now().Truncate(time.Second)
	// a/c/3 must outlive the import and the checks after it on a loaded machine;
	// the test then waits until it has expired.
	const short = 15 * time.Second
	in := []storage.Record{
		{Key: []byte("a/b/1"), Value: []byte("v1")},
		{Key: []byte("a/b/2"), Value: nil}, // an empty value stays empty, not NULL
		{Key: []byte("a/c/1"), Value: []byte("in 3 minutes"), ExpiresAt: now.Add(3 * time.Minute)},
		{Key: []byte("a/c/2"), Value: []byte("already expired"), ExpiresAt: now.Add(-time.Second)},
		{Key: []byte("a/c/3"), Value: []byte("in 15 seconds"), ExpiresAt: now.Add(short)},
	}
	// More than one COPY batch.
	for i := range importBatch + 5 {
		in = append(in, storage.Record{Key: fmt.Appendf(nil, "z/many/%05d", i), Value: []byte{byte(i)}})
	}
	n, err := s.Import(ctx, records{rs: in})
	if err != nil {
		t.Fatal(err)
	}
	if want := len(in) - 1; n != want {
		t.Errorf("Import wrote %d records, want %d (all but the expired one)", n, want)
	}
	got := exportAll(t, s)
	if len(got) != len(in)-1 {
		t.Fatalf("Export gave %d records, want %d", len(got), len(in)-1)
	}
	j := 0
	for _, want := range in {
		if !want.ExpiresAt.IsZero() && want.ExpiresAt.Before(now) {
			continue
		}
		r := got[j]
		j++
		if !bytes.Equal(r.Key, want.Key) || !bytes.Equal(r.Value, want.Value) || r.Value == nil || !r.ExpiresAt.Equal(want.ExpiresAt) {
			t.Errorf("exported %q=%q@%v, want %q=%q@%v", r.Key, r.Value, r.ExpiresAt, want.Key, want.Value, want.ExpiresAt)
		}
	}
	// The copy is a store like any other: Get sees the records, and the database
	// expires them at their own instant.
	err = s.View(ctx, func(txn storage.Txn) error {
		for _, k := range []string{"a/b/1", "a/c/1", "a/c/3"} {
			if _, err := txn.Get([]byte(k)); err != nil {
				return fmt.Errorf("get %s: %w", k, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(now.Add(short)) + 100*time.Millisecond)
	err = s.View(ctx, func(txn storage.Txn) error {
		if _, err := txn.Get([]byte("a/c/3")); !errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("get of a record past its expiry: %v, want ErrNotFound", err)
		}
		_, err := txn.Get([]byte("a/c/1"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestImportRefusesNonEmptyTarget(t *testing.T) {
	ctx := context.Background()
	in := records{rs: []storage.Record{{Key: []byte("k/x/1"), Value: []byte("new")}}}
	for _, tt := range []struct {
		name string
		ttl  time.Duration
	}{{"live record", 0}, {"expired record only", time.Microsecond}} {
		t.Run(tt.name, func(t *testing.T) {
			dsn := pgtest.DSN(t)
			s := closeT(t, openT(t, config(t, dsn)))
			err := s.Update(ctx, func(txn storage.Txn) error { return txn.Set([]byte("old/y/1"), []byte("old"), tt.ttl) })
			if err != nil {
				t.Fatal(err)
			}
			before := table(t, dsn)
			n, err := s.Import(ctx, in)
			if !errors.Is(err, storage.ErrNotEmpty) || n != 0 {
				t.Errorf("Import into a non-empty store: %d, %v; want 0, ErrNotEmpty", n, err)
			}
			if after := table(t, dsn); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("a refused Import changed the table:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

func TestImportAllOrNothing(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := closeT(t, openT(t, config(t, dsn)))
	boom := errors.New("source failed")
	var rs []storage.Record
	for i := range importBatch + 1 { // one COPY sent before the failure
		rs = append(rs, storage.Record{Key: fmt.Appendf(nil, "k/x/%05d", i), Value: []byte("v")})
	}
	if _, err := s.Import(context.Background(), records{rs: rs, err: boom}); !errors.Is(err, boom) {
		t.Fatalf("Import from a failing source: %v, want it to wrap the source's error", err)
	}
	if rows := table(t, dsn); len(rows) != 0 {
		t.Errorf("a failed Import left %d rows, want none", len(rows))
	}
	// A duplicate key (a source out of order or repeating itself) fails it too.
	dup := records{rs: []storage.Record{{Key: []byte("k")}, {Key: []byte("k")}}}
	if _, err := s.Import(context.Background(), dup); err == nil {
		t.Error("Import of a duplicate key succeeded")
	}
	if rows := table(t, dsn); len(rows) != 0 {
		t.Errorf("a failed Import left %d rows, want none", len(rows))
	}
}

// TestMigrateFromBadger copies a Badger store into PostgreSQL and compares them, as
// `caddy palmgate migrate` does, then alters the copy behind the store's back.
func TestMigrateFromBadger(t *testing.T) {
	ctx := context.Background()
	src, err := badgerstore.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	err = src.Update(ctx, func(txn storage.Txn) error {
		for i := range 50 {
			ttl := time.Duration(0)
			if i%3 == 0 {
				ttl = time.Duration(i+1) * time.Minute
			}
			if err := txn.Set(fmt.Appendf(nil, "kind%d/sub/%03d", i%4, i), fmt.Appendf(nil, "value %d", i), ttl); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dsn := pgtest.DSN(t)
	dst := closeT(t, openT(t, config(t, dsn)))
	n, err := dst.Import(ctx, src)
	if err != nil || n != 50 {
		t.Fatalf("Import: %d, %v; want 50 records", n, err)
	}
	cmp, err := storage.Compare(ctx, src, dst, time.Minute, firstTwo)
	if err != nil {
		t.Fatal(err)
	}
	if !cmp.OK() || len(cmp) != 4 {
		t.Fatalf("Compare after the copy: %+v, want 4 matching kinds", cmp)
	}
	for _, k := range cmp {
		if k.Source != k.Target || k.Source < 12 {
			t.Errorf("kind %s: %d and %d records", k.Kind, k.Source, k.Target)
		}
	}

	// A changed expiry, then a deleted record, must show.
	conn := sqlConn(t, dsn)
	if _, err := conn.Exec(ctx, `UPDATE palmgate_kv SET expires_at = expires_at + INTERVAL '1 second' WHERE key = 'kind1/sub/009'`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `DELETE FROM palmgate_kv WHERE key = 'kind2/sub/002'`); err != nil {
		t.Fatal(err)
	}
	cmp, err = storage.Compare(ctx, src, dst, time.Minute, firstTwo)
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{}
	for _, k := range cmp {
		if !k.OK() {
			bad[k.Kind] = string(k.FirstDifference)
		}
	}
	if len(bad) != 2 || bad["kind1/sub"] != "kind1/sub/009" || bad["kind2/sub"] != "kind2/sub/002" {
		t.Errorf("Compare after altering the copy: mismatches %v, want kind1/sub (at 009) and kind2/sub (at 002)", bad)
	}
}

// firstTwo is the kind rule of the tests: palmgate's (core/records.Kind), which
// storage does not import.
func firstTwo(key []byte) string {
	parts := strings.SplitN(string(key), "/", 3)
	if len(parts) < 3 {
		return parts[0]
	}
	return parts[0] + "/" + parts[1]
}
