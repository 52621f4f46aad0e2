package service

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/palmgate/palmgate/internal/loadgen"
	"github.com/palmgate/palmgate/storage/pgstore"
)

// storageReport is the comparison's report: the method, a table of medians per
// backend, the goals.
func storageReport(kinds []storageKind, results map[string][]storageResult, cfg SeedConfig, loadStart, loadEnd string) string {
	maxConns := *storageMaxConns
	if maxConns == 0 {
		maxConns = pgstore.DefaultMaxConns
	}
	var b strings.Builder
	fmt.Fprintf(&b, "machine: %s; load average %s at the start, %s at the end\n", loadgen.Machine(), loadStart, loadEnd)
	fmt.Fprintf(&b, "stores: %d humans, %d agents seeded into each (Badger: a copy of the cached seed; PostgreSQL 15: a private cluster, fsync, full_page_writes and synchronous_commit on, shared_buffers %s, max_conns %d)\n",
		cfg.Humans, cfg.Agents, *storageBuffers, maxConns)
	fmt.Fprintf(&b, "method: %d rounds x %d operations x 2 backends, operations in a rotated order, backends alternating first; %s warm-up + %s measured each; requests %d connections, registrations %d workers; medians over rounds; PG/Badger is the median of the per-round ratios\n\n",
		*loadRounds, len(kinds), *loadWarmup, *loadDuration, *loadConns, *loadAgents)
	b.WriteString("| operation | backend | ops/s | p50 | p99 | caddy CPU µs/op | postgres CPU µs/op | load gen. CPU µs/op | bound (cores busy: caddy + postgres + load gen.; of the run whose rate is the median) | others (cores) |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---|---:|\n")
	rate := func(r storageResult) float64 { return r.Rate() }
	var noisy []string
	for _, k := range kinds {
		for _, be := range []string{"badger", "postgres"} {
			rs := results[be+"/"+k.name]
			if len(rs) == 0 {
				continue
			}
			mid := medianRun(rs)
			fmt.Fprintf(&b, "| %s | %s | %.0f %s/s | %s | %s | %.1f | %.1f | %.1f | %s | %.2f |\n", k.name, be,
				loadgen.MedianOf(rs, rate), k.unit,
				loadgen.MedianDuration(rs, func(r storageResult) time.Duration { return r.P50 }),
				loadgen.MedianDuration(rs, func(r storageResult) time.Duration { return r.P99 }),
				loadgen.MedianOf(rs, func(r storageResult) float64 { return perOp(r.ProcessCPU, r.result) }),
				loadgen.MedianOf(rs, func(r storageResult) float64 { return perOp(r.pgCPU, r.result) }),
				loadgen.MedianOf(rs, func(r storageResult) float64 { return perOp(r.SelfCPU, r.result) }),
				mid.bound(), loadgen.MedianOf(rs, func(r storageResult) float64 { return r.otherCores }))
			for i, r := range rs {
				if r.otherCores > noisyCores {
					noisy = append(noisy, fmt.Sprintf("round %d %s on %s (%.2f)", i+1, k.name, be, r.otherCores))
				}
				if r.PoolExhaustedAt > 0 && r.PoolExhaustedAt < *loadDuration*9/10 {
					noisy = append(noisy, fmt.Sprintf("round %d %s on %s: its pool ran out after %s", i+1, k.name, be, r.PoolExhaustedAt.Round(time.Millisecond)))
				}
			}
		}
	}
	b.WriteString("\npostgres CPU: every process of the cluster (postmaster, backends, WAL writer, checkpointer, autovacuum), from /proc/<pid>/stat.\n")
	if len(noisy) > 0 {
		fmt.Fprintf(&b, "WARNING: disturbed figures (other processes above %.2f cores, or a short pool): %s\n", noisyCores, strings.Join(noisy, ", "))
	}
	b.WriteString("\nGoals (PostgreSQL over Badger, same run):\n\n")
	b.WriteString("| operation | Badger | PostgreSQL | PG/Badger (per round) | CPU ratio | goal | |\n|---|---:|---:|---:|---:|---:|---|\n")
	for _, k := range kinds {
		bg, pg := results["badger/"+k.name], results["postgres/"+k.name]
		if len(bg) == 0 || len(pg) == 0 {
			continue
		}
		var ratios, cpu []float64
		var per []string
		for i := range min(len(bg), len(pg)) {
			ratios = append(ratios, pg[i].Rate()/bg[i].Rate())
			cpu = append(cpu, perOp(bg[i].ours(), bg[i].result)/perOp(pg[i].ours(), pg[i].result))
			per = append(per, fmt.Sprintf("%.2f", ratios[i]))
		}
		x := loadgen.Median(ratios)
		verdict := "PASS"
		if x < k.goal {
			verdict = "MISS"
		}
		fmt.Fprintf(&b, "| %s | %.0f/s | %.0f/s | **%.2f** (%s) | %.2f | ≥ %.2f | %s |\n", k.name,
			loadgen.MedianOf(bg, rate), loadgen.MedianOf(pg, rate), x, strings.Join(per, ", "), loadgen.Median(cpu), k.goal, verdict)
	}
	b.WriteString("\nCPU ratio: CPU per operation of everything measured (caddy + postgres + load generator) on Badger over PostgreSQL's: the throughput ratio if the cores served only these processes.\n")
	return b.String()
}

// medianRun is the run whose rate is the median (the lower middle one).
func medianRun(rs []storageResult) storageResult {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b storageResult) int {
		switch {
		case a.Rate() < b.Rate():
			return -1
		case a.Rate() > b.Rate():
			return 1
		}
		return 0
	})
	return s[(len(s)-1)/2]
}
