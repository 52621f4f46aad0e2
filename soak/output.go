package main

import (
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

var columns = []string{"t_s", "rss_mb", "hwm_mb", "heap_mb", "disk_mb", "alloc_mb", "sst_mb", "vlog_mb", "mem_mb",
	"records", "agent/s", "palm/c", "oidc/ar", "agent/pg", "agent/m", "oidc/code", "oidc/grant", "oidc/revoked", "agent/d", "req_s", "errors"}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

func (s sample) values() []string {
	v := []string{
		strconv.Itoa(int(s.at.Round(time.Second).Seconds())),
		fmt.Sprintf("%.1f", float64(s.rssKB)/1024), fmt.Sprintf("%.1f", float64(s.hwmKB)/1024), fmt.Sprintf("%.1f", s.heapMB),
		fmt.Sprintf("%.1f", mb(s.diskBytes)), fmt.Sprintf("%.1f", mb(s.allocBytes)),
		fmt.Sprintf("%.1f", mb(s.sstBytes)), fmt.Sprintf("%.1f", mb(s.vlogBytes)), fmt.Sprintf("%.1f", mb(s.memBytes)),
		strconv.Itoa(s.total),
	}
	for _, k := range columns[10:19] {
		v = append(v, strconv.Itoa(s.records[k]))
	}
	return append(v, fmt.Sprintf("%.0f", s.rps), strconv.FormatInt(s.errors, 10))
}

func printHeader() {
	var b strings.Builder
	for _, c := range columns {
		fmt.Fprintf(&b, "%9s", shortName(c))
	}
	fmt.Println(b.String())
}

func shortName(c string) string {
	if len(c) > 8 {
		return c[len(c)-8:]
	}
	return c
}

func printRow(s sample) {
	var b strings.Builder
	for _, v := range s.values() {
		fmt.Fprintf(&b, "%9s", v)
	}
	fmt.Println(b.String())
}

func writeCSV(path string, samples []sample) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write(columns)
	for _, s := range samples {
		_ = w.Write(s.values())
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// thirds returns the maxima of the middle and the last third of xs (the first
// sample, taken before any load, is left out).
func thirds(xs []float64) (mid, last float64, ok bool) {
	if len(xs) > 1 {
		xs = xs[1:]
	}
	n := len(xs)
	if n < 3 {
		return 0, 0, false
	}
	mid, last = math.Inf(-1), math.Inf(-1)
	for i, x := range xs {
		switch {
		case i >= 2*n/3:
			last = max(last, x)
		case i >= n/3:
			mid = max(mid, x)
		}
	}
	return mid, last, true
}

func series(samples []sample, f func(sample) float64) []float64 {
	xs := make([]float64, len(samples))
	for i, s := range samples {
		xs[i] = f(s)
	}
	return xs
}

// verdict prints whether each series stayed bounded and returns false when RSS
// or an expiring record kind did not.
func verdict(samples []sample, bound float64) bool {
	ok := true
	check := func(name string, xs []float64, judged bool) {
		mid, last, enough := thirds(xs)
		if !enough {
			fmt.Printf("  %-22s too few samples to judge\n", name)
			return
		}
		bounded := last <= bound*mid || last <= 2 // a handful of records is bounded whatever its ratio
		word := "bounded"
		if !bounded {
			word = "GROWING"
			if judged {
				ok = false
			}
		}
		if !judged {
			word += " (not judged)"
		}
		fmt.Printf("  %-22s middle-third max %10.1f, last-third max %10.1f, ratio %5.2f: %s\n", name, mid, last, last/math.Max(mid, 1e-9), word)
	}
	fmt.Printf("\nbounded = max of the last third <= %.2f x max of the middle third:\n", bound)
	check("RSS (MB)", series(samples, func(s sample) float64 { return float64(s.rssKB) / 1024 }), true)
	check("Go heap in use (MB)", series(samples, func(s sample) float64 { return s.heapMB }), false)
	check("disk, file sizes (MB)", series(samples, func(s sample) float64 { return mb(s.diskBytes) }), false)
	check("disk, allocated (MB)", series(samples, func(s sample) float64 { return mb(s.allocBytes) }), false)
	for _, k := range expiringKinds {
		check("records "+k, series(samples, func(s sample) float64 { return float64(s.records[k]) }), true)
	}
	if len(samples) >= 2 {
		first, last := samples[0], samples[len(samples)-1]
		secs := (last.at - first.at).Seconds()
		fmt.Println("\nrecords kept past their expiry by design (verified ones a day: they grow for 24 h under steady load), and permanent ones:")
		for _, k := range append(append([]string{}, retainedKinds...), permanentKinds...) {
			fmt.Printf("  %-10s %7d -> %7d (%.1f/s)\n", k, first.records[k], last.records[k], float64(last.records[k]-first.records[k])/secs)
		}
		grow := float64(last.allocBytes-first.allocBytes) / float64(max(last.total-first.total, 1))
		fmt.Printf("  disk grew %.1f MB for %d more records (%.0f bytes allocated per retained record)\n",
			mb(last.allocBytes-first.allocBytes), last.total-first.total, grow)
	}
	if ok {
		fmt.Println("\nverdict: RSS and the expiring records stayed bounded")
	} else {
		fmt.Println("\nverdict: NOT bounded (see above)")
	}
	return ok
}
