package storage_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/palmgate/palmgate/storage"
)

// records is an Exporter over a sorted slice.
type records []storage.Record

func (rs records) Export(ctx context.Context, fn func(storage.Record) error) error {
	for _, r := range rs {
		if err := fn(storage.Record{Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value), ExpiresAt: r.ExpiresAt}); err != nil {
			return err
		}
	}
	return nil
}

// failing is an Exporter that fails after its records.
type failing struct {
	records
	err error
}

func (f failing) Export(ctx context.Context, fn func(storage.Record) error) error {
	if err := f.records.Export(ctx, fn); err != nil {
		return err
	}
	return f.err
}

func rec(key, value string, expiresAt time.Time) storage.Record {
	return storage.Record{Key: []byte(key), Value: []byte(value), ExpiresAt: expiresAt}
}

func TestCompare(t *testing.T) {
	now := time.Now()
	later := now.Add(time.Hour)
	soon := now.Add(10 * time.Second) // within the margin below
	const margin = time.Minute
	base := records{
		rec("agent/d/a", "1", time.Time{}),
		rec("agent/d/b", "2", time.Time{}),
		rec("agent/k/x", "3", time.Time{}),
		rec("oidc/refresh/r", "4", later),
		rec("solo", "5", time.Time{}),
	}
	with := func(rs records, edit func(records) records) records {
		return edit(append(records(nil), rs...))
	}
	tests := []struct {
		name     string
		src, dst records
		bad      map[string]bool // kinds that must not match
		expired  map[string]int
		first    map[string]string
	}{
		{name: "identical", src: base, dst: base},
		{name: "both empty"},
		{name: "value differs", src: base,
			dst: with(base, func(rs records) records { rs[1] = rec("agent/d/b", "X", time.Time{}); return rs }),
			bad: map[string]bool{"agent/d": true}, first: map[string]string{"agent/d": "agent/d/b"}},
		{name: "expiry differs", src: base,
			dst: with(base, func(rs records) records { rs[3] = rec("oidc/refresh/r", "4", later.Add(time.Second)); return rs }),
			bad: map[string]bool{"oidc/refresh": true}},
		{name: "expiry lost", src: base,
			dst: with(base, func(rs records) records { rs[3] = rec("oidc/refresh/r", "4", time.Time{}); return rs }),
			bad: map[string]bool{"oidc/refresh": true}},
		{name: "missing in target", src: base,
			dst: with(base, func(rs records) records { return append(rs[:2], rs[3:]...) }),
			bad: map[string]bool{"agent/k": true}, first: map[string]string{"agent/k": "agent/k/x"}},
		{name: "extra in target", src: base,
			dst: with(base, func(rs records) records { return append(rs, rec("zzz/y/z", "6", time.Time{})) }),
			bad: map[string]bool{"zzz/y": true}},
		{name: "long-lived record missing in target", src: with(base, func(rs records) records {
			return append(rs[:4:4], rec("oidc/refresh/s", "7", later), rs[4])
		}), dst: base, bad: map[string]bool{"oidc/refresh": true}},
		{name: "record expiring during the copy, in source only",
			src: with(base, func(rs records) records { return append(rs[:4:4], rec("oidc/code/c", "8", soon), rs[4]) }),
			dst: base, expired: map[string]int{"oidc/code": 1}},
		{name: "record expiring during the copy, in target only", src: base,
			dst:     with(base, func(rs records) records { return append(rs[:4:4], rec("oidc/code/c", "8", soon), rs[4]) }),
			expired: map[string]int{"oidc/code": 1}},
		{name: "expiring record on both sides still compared",
			src: with(base, func(rs records) records { return append(rs[:4:4], rec("oidc/code/c", "8", soon), rs[4]) }),
			dst: with(base, func(rs records) records { return append(rs[:4:4], rec("oidc/code/c", "9", soon), rs[4]) }),
			bad: map[string]bool{"oidc/code": true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := storage.Compare(context.Background(), tt.src, tt.dst, margin, firstTwo)
			if err != nil {
				t.Fatal(err)
			}
			if want := len(tt.bad) == 0; got.OK() != want {
				t.Errorf("OK() = %v, want %v: %+v", got.OK(), want, got)
			}
			srcCounts, dstCounts := map[string]int{}, map[string]int{}
			for _, r := range tt.src {
				srcCounts[kind(r.Key)]++
			}
			for _, r := range tt.dst {
				dstCounts[kind(r.Key)]++
			}
			for i, k := range got {
				if i > 0 && got[i-1].Kind >= k.Kind {
					t.Errorf("kinds out of order: %q then %q", got[i-1].Kind, k.Kind)
				}
				if k.OK() == tt.bad[k.Kind] {
					t.Errorf("kind %s: OK() = %v, want %v: %+v", k.Kind, k.OK(), !tt.bad[k.Kind], k)
				}
				if k.Expired != tt.expired[k.Kind] {
					t.Errorf("kind %s: Expired = %d, want %d", k.Kind, k.Expired, tt.expired[k.Kind])
				}
				if k.Source+k.Expired*b2i(srcCounts[k.Kind] > dstCounts[k.Kind]) != srcCounts[k.Kind] ||
					k.Target+k.Expired*b2i(dstCounts[k.Kind] > srcCounts[k.Kind]) != dstCounts[k.Kind] {
					t.Errorf("kind %s: counts %d/%d (expired %d), records %d/%d", k.Kind, k.Source, k.Target, k.Expired, srcCounts[k.Kind], dstCounts[k.Kind])
				}
				if k.OK() && k.FirstDifference != nil {
					t.Errorf("kind %s matches but FirstDifference = %q", k.Kind, k.FirstDifference)
				}
				if want, ok := tt.first[k.Kind]; ok && string(k.FirstDifference) != want {
					t.Errorf("kind %s: FirstDifference = %q, want %q", k.Kind, k.FirstDifference, want)
				}
				delete(srcCounts, k.Kind)
				delete(dstCounts, k.Kind)
			}
			if len(srcCounts)+len(dstCounts) > 0 {
				t.Errorf("kinds missing from the comparison: %v %v", srcCounts, dstCounts)
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// kind is the kind rule, spelled out again so that a change to it is noticed.
func kind(key []byte) string {
	parts := bytes.SplitN(key, []byte("/"), 3)
	if len(parts) == 1 {
		return string(key)
	}
	return string(parts[0]) + "/" + string(parts[1])
}

func TestCompareChecksumIsOfTheRecords(t *testing.T) {
	a := records{rec("k/a/1", "v", time.Time{})}
	b := records{rec("k/a/1", "w", time.Time{})}
	ca, err := storage.Compare(context.Background(), a, a, 0, firstTwo)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := storage.Compare(context.Background(), b, b, 0, firstTwo)
	if err != nil {
		t.Fatal(err)
	}
	if !ca.OK() || !cb.OK() || ca[0].SourceSum == cb[0].SourceSum || ca[0].SourceSum != ca[0].TargetSum {
		t.Errorf("checksums do not follow the records: %x %x", ca[0].SourceSum, cb[0].SourceSum)
	}
}

func TestCompareReadError(t *testing.T) {
	boom := errors.New("boom")
	for _, tt := range []struct {
		name     string
		src, dst storage.Exporter
		want     string
	}{
		{"source", failing{records{rec("a/b/c", "", time.Time{})}, boom}, records{rec("a/b/c", "", time.Time{})}, "reading the source: boom"},
		{"target", records{}, failing{nil, boom}, "reading the target: boom"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := storage.Compare(context.Background(), tt.src, tt.dst, 0, firstTwo)
			if !errors.Is(err, boom) || err.Error() != tt.want {
				t.Errorf("Compare error = %v, want %q", err, tt.want)
			}
		})
	}
}
