// Command soak runs the palmgate build of Caddy under mixed load for a set time
// and samples, every interval, the server's resident memory (VmRSS), the disk use
// of its Badger directory, the store's record counts by kind (admin
// GET /palmgate/stats) and the request rate. It prints a table as it goes, writes
// the samples as CSV and ends with a verdict: did memory, disk and the records that
// expire stay bounded?
//
//	go build -o bin/caddy ./cmd/caddy
//	go run ./soak -duration 10m -out soak.csv
//
// The server runs with short lifetimes so that garbage appears quickly:
// registration_session_ttl 10s, auth_code_ttl 5s, access_token_ttl 30s,
// refresh_token_ttl 2m, challenge_max_age 1m (replay markers live 2 x that + 1m),
// rate_limit off, dev. The load opens registration sessions
// (most left to expire, some completed with a simulated palm scan), logins (some
// abandoned before the scan, some codes never redeemed, the rest exchanged,
// refreshed and used at userinfo; 5% then reuse a rotated refresh token, which
// revokes the family), agent lookups and leaderboard reads.
//
// Verdict: a series is bounded when the maximum of the last third of the samples
// is at most -bound (1.5) times the maximum of the middle third. It is computed
// for RSS, for the disk use, and for the record kinds that expire within the run
// (pending-session index, replay markers, codes, grants, revocations). Sessions,
// palm challenges and authorization requests are kept 10 minutes past their expiry
// when unfinished, and a day when a palm verified them, so the verified ones, and
// the disk they occupy, grow for the first 24 hours of any steady load: the soak
// reports their growth rate rather than judging them. The exit status is 1 when RSS or an
// expiring kind is not bounded, or when requests failed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Record kinds the table shows (keys of GET /palmgate/stats).
var (
	// expiring kinds live at most a few minutes with the soak's lifetimes.
	expiringKinds = []string{"agent/pg", "agent/m", "oidc/code", "oidc/grant", "oidc/revoked"}
	// retainedKinds are kept past their expiry by design: a day once verified.
	retainedKinds = []string{"agent/s", "palm/c", "oidc/ar"}
	// permanentKinds are registered agents and their indexes.
	permanentKinds = []string{"agent/d"}
)

const (
	clientID     = "soak"
	clientSecret = "soak-secret-0123456789abcdef"
	redirectURI  = "https://soak.example/callback"
)

type config struct {
	duration    time.Duration
	interval    time.Duration
	concurrency int
	caddy       string
	out         string
	dataDir     string
	keep        bool
	bound       float64
}

func main() {
	var c config
	flag.DurationVar(&c.duration, "duration", 10*time.Minute, "how long to run the load")
	flag.DurationVar(&c.interval, "interval", 10*time.Second, "time between samples")
	flag.IntVar(&c.concurrency, "concurrency", 4, "concurrent load workers")
	flag.StringVar(&c.caddy, "caddy", "bin/caddy", "the palmgate build of caddy (make build)")
	flag.StringVar(&c.out, "out", "soak.csv", "CSV file of the samples")
	flag.StringVar(&c.dataDir, "datadir", "", "directory for the server's data and config (default: a new temporary one)")
	flag.BoolVar(&c.keep, "keep", false, "keep the data directory afterwards")
	flag.Float64Var(&c.bound, "bound", 1.5, "bounded: max of the last third <= bound x max of the middle third")
	flag.Parse()
	ok, err := run(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// sample is one row of the table.
type sample struct {
	at         time.Duration
	rssKB      int64
	hwmKB      int64
	heapMB     float64 // Go heap in use, from the admin /debug/vars (0 if unavailable)
	diskBytes  int64   // sum of file sizes
	allocBytes int64   // allocated blocks (files may be sparse)
	sstBytes   int64
	vlogBytes  int64
	memBytes   int64 // memtable write-ahead logs
	records    map[string]int
	total      int
	rps        float64
	errors     int64
}

func run(c config) (bool, error) {
	bin, err := filepath.Abs(c.caddy)
	if err != nil {
		return false, err
	}
	if _, err := os.Stat(bin); err != nil {
		return false, fmt.Errorf("caddy binary: %w (build it with `make build` or pass -caddy)", err)
	}
	dir := c.dataDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "palmgate-soak-"); err != nil {
			return false, err
		}
		if !c.keep {
			defer os.RemoveAll(dir)
		}
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	srv, err := startServer(bin, dir)
	if err != nil {
		return false, err
	}
	defer srv.stop()
	fmt.Printf("palmgate soak: %s of load, %d workers, a sample every %s; server pid %d at %s, data in %s\n",
		c.duration, c.concurrency, c.interval, srv.cmd.Process.Pid, srv.base, srv.storeDir)

	ctx, cancel := context.WithTimeout(context.Background(), c.duration)
	defer cancel()
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	l := newLoad(srv.base)
	var wg sync.WaitGroup
	for i := range c.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.worker(ctx, i)
		}()
	}

	start := time.Now()
	var samples []sample
	lastReqs, lastAt := int64(0), start
	take := func() {
		now := time.Now()
		reqs := l.requests.Load()
		s := srv.sample(now.Sub(start))
		s.rps = float64(reqs-lastReqs) / now.Sub(lastAt).Seconds()
		s.errors = l.errors.Load()
		lastReqs, lastAt = reqs, now
		if len(samples) == 0 {
			printHeader()
		}
		samples = append(samples, s)
		printRow(s)
	}
	take()
	ticker := time.NewTicker(c.interval)
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-ticker.C:
			take()
			if srv.exited() {
				fmt.Println("the server exited during the run; its log:\n" + srv.logTail())
				cancel()
				done = true
			}
		}
	}
	ticker.Stop()
	wg.Wait()
	if !srv.exited() {
		take() // the end of the run
	}

	if err := writeCSV(c.out, samples); err != nil {
		return false, err
	}
	fmt.Printf("\n%d requests in %s (%.0f/s), %d failed; samples written to %s\n",
		l.requests.Load(), time.Since(start).Round(time.Second), float64(l.requests.Load())/time.Since(start).Seconds(), l.errors.Load(), c.out)
	l.printOps()
	l.printErrors()
	ok := verdict(samples, c.bound)
	if l.errors.Load() > 0 {
		ok = false
	}
	if err := srv.stop(); err != nil {
		fmt.Println("server stop:", err)
		ok = false
	}
	if srv.crashed {
		ok = false
	}
	return ok, nil
}
