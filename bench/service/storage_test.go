package service

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/palmgate/palmgate/internal/loadgen"
	"github.com/palmgate/palmgate/internal/pgtest"
	"github.com/palmgate/palmgate/storage/pgstore"
)

// Flags of TestStorageLoad (besides the -load.* ones it shares with
// TestServiceLoad: duration, warmup, rounds, conns, agents, attestor, only,
// profile, out).
var (
	storageHumans   = flag.Int("storage.humans", 2_000, "TestStorageLoad: seeded humans, in both stores")
	storageAgents   = flag.Int("storage.agents", 20_000, "TestStorageLoad: seeded agents, in both stores")
	storageMaxConns = flag.Int("storage.max_conns", 0, "TestStorageLoad: max_conns of `storage postgres` (0: palmgate's default, 10)")
	storageBuffers  = flag.String("storage.shared_buffers", "128MB", "TestStorageLoad: shared_buffers of the PostgreSQL cluster")
	storageSettings = flag.String("storage.pg_settings", "", "TestStorageLoad: further PostgreSQL server settings, comma-separated name=value")
	storagePGStat   = flag.Bool("storage.pgstat", false, "TestStorageLoad: load pg_stat_statements and print, for each PostgreSQL scenario of the last round, the statements per operation")
)

// Goals of issue 10: PostgreSQL's figure over Badger's, same run.
const (
	goalStorageRead  = 0.80 // signature checks and lookups
	goalStorageWrite = 0.50 // registrations and code exchanges

	storageQuietCores = 0.10 // both caddys and PostgreSQL together, before each scenario
)

// storeBackend is one Caddy and its store.
type storeBackend struct {
	name string // "badger" or "postgres"
	*site
	pg    *pgtest.Cluster // nil for Badger
	pgDSN string          // the database of the PostgreSQL store

	// Prepared requests of the fixed scenarios (their Host is this site's).
	verify, device, publicKey [][]byte

	exchangeReq  [][]byte
	exchangeNext atomic.Int64
	exchangeBest float64 // the best exchange rate of a round so far

	regs        []registration
	regNext     atomic.Int64
	regPerRound int
}

// storageResult is one measured run on one backend.
type storageResult struct {
	result
	pgCPU time.Duration // the PostgreSQL cluster's processes (0 on Badger)
	stmts string        // pg_stat_statements per operation, with -storage.pgstat
}

func (r storageResult) window() time.Duration { return r.After.At.Sub(r.Before.At) }

// ours is the CPU the measured system used: caddy, PostgreSQL and the load generator.
func (r storageResult) ours() time.Duration { return r.ProcessCPU + r.SelfCPU + r.pgCPU }

// bound says what limited a run: the CPUs when caddy, PostgreSQL and the load
// generator together kept nearly every core that other processes left them
// busy, else waiting (round trips, synced commits, locks, retries' pauses).
func (r storageResult) bound() string {
	cores := r.ours().Seconds() / r.window().Seconds()
	left := float64(runtime.NumCPU()) - r.otherCores
	if cores >= 0.85*left {
		return fmt.Sprintf("CPU (%.2f of the %.2f cores others left)", cores, left)
	}
	return fmt.Sprintf("waits (%.2f of the %.2f cores others left)", cores, left)
}

// storageKind is one operation measured on both backends.
type storageKind struct {
	name, what, unit string
	goal             float64
	workers          int
	prepare          func(b *storeBackend) error
	setup            func(b *storeBackend) func(w int) (func() error, func(), error)
}

// TestStorageLoad is issue 10's comparison: the same Caddyfile on Badger and on
// a PostgreSQL database of a private, durable cluster (fsync, full_page_writes
// and synchronous_commit on), both stores seeded with the same records; signature
// checks, lookups, code exchanges and registrations interleaved over rounds,
// alternating the backends; req/s, p50, p99, CPU per operation of caddy, of
// PostgreSQL's processes and of the load generator, and PostgreSQL's figure over
// Badger's against the goals. It reports a missed goal (MISS) but fails only
// when something errs.
func TestStorageLoad(t *testing.T) {
	if !*loadOn {
		t.Skip("the storage comparison runs with -args -load (make bench)")
	}
	if *loadRounds < 1 || *loadDuration < time.Second || *loadConns < 1 || *loadAgents < 1 {
		t.Fatal("need -load.rounds >= 1, -load.duration >= 1s, -load.conns >= 1, -load.agents >= 1")
	}
	cfg := SeedConfig{Humans: *storageHumans, Agents: *storageAgents}
	loadStart := readLoadavg()

	// PostgreSQL: a private cluster as durable as Badger's synced writes.
	settings := []string{"shared_buffers=" + *storageBuffers, "max_connections=200"}
	if *storageSettings != "" {
		settings = append(settings, strings.Split(*storageSettings, ",")...)
	}
	if *storagePGStat {
		settings = append(settings, "shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track_utility=on")
	}
	cluster := pgtest.NewClusterWith(t, pgtest.ClusterOptions{Durable: true, Settings: settings})
	dsn := cluster.DSN(t)
	seedPostgres(t, dsn, cfg)
	storageLine := fmt.Sprintf("storage postgres %q", dsn)
	if *storageMaxConns > 0 {
		storageLine += fmt.Sprintf(" {\n\tmax_conns %d\n}", *storageMaxConns)
	}

	badger := &storeBackend{name: "badger", site: startSite(t, cfg, *loadAttestor)}
	postgres := &storeBackend{name: "postgres", site: launchSite(t, cfg, *loadAttestor, t.TempDir(), storageLine),
		pg: cluster, pgDSN: dsn}
	backends := []*storeBackend{badger, postgres}
	logf("postgres: cluster pid %d, %s, max_conns %s", cluster.PID(), strings.Join(settings, " "),
		map[bool]string{true: strconv.Itoa(*storageMaxConns), false: "10 (default)"}[*storageMaxConns > 0])
	if *storagePGStat {
		if err := pgExec(dsn, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
			t.Fatal(err)
		}
	}

	regBodies, _ := verifyBodies(cfg, badger.owners, requestSample, 0, 1)
	var devicePaths, keyPaths []string
	for k := range requestSample {
		i := int(uint64(k)*0x9E3779B97F4A7C15>>11) % cfg.Agents
		der, _ := x509.MarshalPKIXPublicKey(AgentKey(i).Public().(ed25519.PublicKey))
		devicePaths = append(devicePaths, "/v1/agent/verify/device/"+url.PathEscape(DeviceID(i)))
		keyPaths = append(keyPaths, "/v1/agent/verify/public-key/"+base64.URLEncoding.EncodeToString(der))
	}
	for _, b := range backends {
		for _, body := range regBodies {
			b.verify = append(b.verify, loadgen.PostRequest(b.host, "/v1/agent/verify/signature", "application/json", body))
		}
		for i := range devicePaths {
			b.device = append(b.device, loadgen.GetRequest(b.host, devicePaths[i]))
			b.publicKey = append(b.publicKey, loadgen.GetRequest(b.host, keyPaths[i]))
		}
		b.regPerRound = int(regPoolFallback * (*loadWarmup + *loadDuration).Seconds())
	}

	// Steady state for the signature checks: every agent of the sample checked
	// once, so that palmgate remembers its key (a registration is permanent) on
	// both backends, as a server that has run for a while would.
	if selected("verify-reg") {
		for _, b := range backends {
			start := time.Now()
			if err := sendAll(b.host, b.verify, *loadConns); err != nil {
				t.Fatalf("%s: checking every sampled agent once: %v", b.name, err)
			}
			logf("%s: checked the %d sampled agents once in %s", b.name, len(b.verify), time.Since(start).Round(time.Millisecond))
		}
	}

	// The most exchanges per second the cores could sign: the first round's
	// pool of codes is sized by it, later ones by the backend's best round.
	sign := newSigner(t)
	var maxRate float64
	if selected("exchange") {
		before := loadgen.SampleCPU(0)
		ops := measureRate(sign.sign3, procs(), 2*time.Second) * 2
		maxRate = float64(procs()) / ((loadgen.SampleCPU(0).Self - before.Self).Seconds() / ops)
		logf("the three signatures of an exchange: at most %.0f exchanges/s on %d cores", maxRate, procs())
	}

	fixed := func(reqs func(b *storeBackend) [][]byte) func(b *storeBackend) func(int) (func() error, func(), error) {
		return func(b *storeBackend) func(int) (func() error, func(), error) {
			rs := reqs(b)
			return func(w int) (func() error, func(), error) {
				c, err := loadgen.Dial(b.host)
				if err != nil {
					return nil, nil, err
				}
				i := w * len(rs) / *loadConns
				return func() error {
					req := rs[i%len(rs)]
					i++
					code, err := c.RoundTrip(req)
					if err == nil && code != http.StatusOK {
						err = fmt.Errorf("status %d for %.80q", code, req)
					}
					return err
				}, func() { c.Close() }, nil
			}
		}
	}
	run := randHex(3)
	var regSeq atomic.Int64
	kinds := []storageKind{
		{name: "verify-reg", what: "POST /v1/agent/verify/signature, registered device", unit: "req", goal: goalStorageRead, workers: *loadConns,
			setup: fixed(func(b *storeBackend) [][]byte { return b.verify })},
		{name: "device", what: "GET /v1/agent/verify/device/{deviceId}", unit: "req", goal: goalStorageRead, workers: *loadConns,
			setup: fixed(func(b *storeBackend) [][]byte { return b.device })},
		{name: "public-key", what: "GET /v1/agent/verify/public-key/{SPKI}", unit: "req", goal: goalStorageRead, workers: *loadConns,
			setup: fixed(func(b *storeBackend) [][]byte { return b.publicKey })},
		{name: "exchange", what: "POST /oauth2/token, authorization_code, each code once", unit: "req", goal: goalStorageWrite, workers: *loadConns,
			prepare: func(b *storeBackend) error {
				rate := maxRate * codePoolMargin
				if b.exchangeBest > 0 {
					rate = min(rate, 1.5*b.exchangeBest)
				}
				n := int(rate*(*loadWarmup+*loadDuration).Seconds()) + 100
				start := time.Now()
				codes, err := b.mintCodes(n, *loadAgents)
				if err != nil {
					return fmt.Errorf("minting codes: %w", err)
				}
				logf("%s: minted %d codes in %s (%.0f/s)", b.name, n, time.Since(start).Round(time.Millisecond), float64(n)/time.Since(start).Seconds())
				b.exchangeReq = b.exchangeReq[:0]
				for _, c := range codes {
					b.exchangeReq = append(b.exchangeReq, loadgen.PostRequest(b.host, "/oauth2/token", "application/x-www-form-urlencoded", c))
				}
				b.exchangeNext.Store(0)
				return nil
			},
			setup: func(b *storeBackend) func(int) (func() error, func(), error) {
				return func(int) (func() error, func(), error) {
					c, err := loadgen.Dial(b.host)
					if err != nil {
						return nil, nil, err
					}
					return func() error {
						i := b.exchangeNext.Add(1) - 1
						if i >= int64(len(b.exchangeReq)) {
							return loadgen.ErrPoolDone
						}
						code, err := c.RoundTrip(b.exchangeReq[i])
						if err == nil && code != http.StatusOK {
							err = fmt.Errorf("token: status %d", code)
						}
						return err
					}, func() { c.Close() }, nil
				}
			}},
		{name: "register", what: fmt.Sprintf("%d agents: init, owner's page, palm assertion", *loadAgents), unit: "registration",
			goal: goalStorageWrite, workers: *loadAgents,
			prepare: func(b *storeBackend) error {
				b.regs = make([]registration, b.regPerRound)
				parallel(len(b.regs), func(i int) { b.regs[i] = newRegistration(cfg, run, int(regSeq.Add(1))) })
				b.regNext.Store(0)
				return nil
			},
			setup: func(b *storeBackend) func(int) (func() error, func(), error) {
				return func(int) (func() error, func(), error) {
					c, err := loadgen.Dial(b.host)
					if err != nil {
						return nil, nil, err
					}
					return func() error {
						var r registration
						if i := b.regNext.Add(1) - 1; i < int64(len(b.regs)) {
							r = b.regs[i]
						} else {
							r = newRegistration(cfg, run, int(regSeq.Add(1)))
						}
						return b.register(c, r)
					}, func() { c.Close() }, nil
				}
			}},
	}
	kinds = slices.DeleteFunc(kinds, func(k storageKind) bool { return !selected(k.name) })

	results := map[string][]storageResult{} // by backend/kind
	for r := range *loadRounds {
		for _, k := range loadgen.Rotate(kinds, r) {
			order := backends
			if r%2 == 1 {
				order = []*storeBackend{postgres, badger}
			}
			for _, b := range order {
				if k.prepare != nil {
					if err := k.prepare(b); err != nil {
						t.Fatalf("round %d, %s on %s: %v", r+1, k.name, b.name, err)
					}
				}
				if waited, idle := waitQuiet(backends); !idle {
					logf("round %d, %s on %s: still busy after %s; measuring anyway", r+1, k.name, b.name, waited.Round(time.Second))
				} else if waited > 2*quietWindow {
					logf("round %d, %s on %s: waited %s for caddy and postgres to go quiet", r+1, k.name, b.name, waited.Round(100*time.Millisecond))
				}
				profile := ""
				if *loadProfile != "" && r == *loadRounds-1 {
					profile = filepath.Join(*loadProfile, b.name+"-"+k.name+".pprof")
				}
				res, err := runOn(b, k, profile, *storagePGStat && r == *loadRounds-1)
				if err != nil {
					t.Fatalf("round %d, %s on %s: %v", r+1, k.name, b.name, err)
				}
				switch k.name {
				case "exchange":
					b.exchangeBest = max(b.exchangeBest, res.Rate())
				case "register":
					b.regPerRound = int(res.Rate()*(*loadWarmup+*loadDuration).Seconds()*1.33) + 100
				}
				results[b.name+"/"+k.name] = append(results[b.name+"/"+k.name], res)
				fmt.Printf("round %d  %-8s %-10s %8.0f %s/s  p50 %-9s p99 %-9s caddy %6.1f µs/op  postgres %6.1f µs/op  load gen. %5.1f µs/op  others %.2f cores  bound: %s%s\n",
					r+1, b.name, k.name, res.Rate(), k.unit, res.P50, res.P99, perOp(res.ProcessCPU, res.result), perOp(res.pgCPU, res.result),
					perOp(res.SelfCPU, res.result), res.otherCores, res.bound(), exhausted(res.result))
				if res.stmts != "" {
					fmt.Print(res.stmts)
				}
			}
		}
	}
	for _, b := range backends {
		if err := b.checkRegistered(); err != nil {
			t.Fatalf("%s, after the rounds: %v", b.name, err)
		}
	}
	report := storageReport(kinds, results, cfg, loadStart, readLoadavg())
	fmt.Print("\n" + report)
	if *loadOut != "" {
		if err := os.WriteFile(*loadOut, []byte(report), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// sendAll sends every request once, on conns connections, each expecting 200.
func sendAll(host string, reqs [][]byte, conns int) error {
	var next atomic.Int64
	errs := make([]error, conns)
	var wg sync.WaitGroup
	for w := range conns {
		wg.Go(func() {
			c, err := loadgen.Dial(host)
			if err != nil {
				errs[w] = err
				return
			}
			defer c.Close()
			for {
				i := next.Add(1) - 1
				if i >= int64(len(reqs)) {
					return
				}
				if code, err := c.RoundTrip(reqs[i]); err != nil || code != http.StatusOK {
					errs[w] = fmt.Errorf("status %d: %v", code, err)
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// seedPostgres writes the seed's records into the database of dsn through
// pgstore (the same records and transactions as the Badger seed), then
// vacuums, analyzes and checkpoints, so that the rounds start from a settled
// database.
func seedPostgres(t testing.TB, dsn string, cfg SeedConfig) {
	t.Helper()
	ctx := context.Background()
	store, err := pgstore.Open(ctx, pgstore.Config{DSN: dsn, MaxConns: 4, SweepInterval: -1, StatementTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := SeedStore(ctx, store, cfg, nil); err != nil {
		store.Close()
		t.Fatalf("seeding postgres: %v", err)
	}
	store.Close()
	for _, q := range []string{"VACUUM ANALYZE palmgate_kv", "CHECKPOINT"} {
		if err := pgExec(dsn, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	logf("seeded %d humans and %d agents into postgres in %s", cfg.Humans, cfg.Agents, time.Since(start).Round(time.Millisecond))
}

// pgExec runs one statement on a connection of its own.
func pgExec(dsn, q string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, q)
	return err
}

// runOn runs kind k on backend b: worker setup, the warm-up, the measured
// part; caddy's CPU, PostgreSQL's (every process of the cluster) and this
// process's are sampled around the measured part.
func runOn(b *storeBackend, k storageKind, profile string, pgstat bool) (storageResult, error) {
	setup := k.setup(b)
	ops := make([]loadgen.Op, k.workers)
	for w := range ops {
		op, done, err := setup(w)
		if err != nil {
			return storageResult{}, err
		}
		defer done()
		ops[w] = func(bool) error { return op() }
	}
	pgPID := 0
	if b.pg != nil {
		pgPID = b.pg.PID()
	}
	var pgBefore time.Duration
	var statErr error
	o := loadgen.Options{Warmup: *loadWarmup, Duration: *loadDuration, PID: b.pid}
	o.Profile = func() error {
		// Run calls this at the start of the measured part, beside its own sample.
		pgBefore = treeCPU(pgPID)
		if pgstat && b.pg != nil {
			statErr = pgExec(b.pgDSN, "SELECT pg_stat_statements_reset()")
		}
		if profile != "" {
			return loadgen.FetchProfile(b.AdminAddr, max(1, int(loadDuration.Seconds())), profile)
		}
		return nil
	}
	res, err := loadgen.Run(ops, o)
	if err != nil {
		return storageResult{}, err
	}
	out := storageResult{result: result{Result: res}}
	if pgPID != 0 {
		out.pgCPU = treeCPU(pgPID) - pgBefore
	}
	out.otherCores = res.OtherCores(out.ours(), out.window())
	if pgstat && b.pg != nil {
		if statErr != nil {
			return storageResult{}, statErr
		}
		if out.stmts, err = statements(b.pgDSN, res.Ops); err != nil {
			return storageResult{}, err
		}
	}
	return out, nil
}

// statements lists the statements pg_stat_statements counted since its reset,
// per operation (ops: the measured ones).
func statements(dsn string, ops int) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT calls, total_exec_time, regexp_replace(query, '\s+', ' ', 'g')
FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
AND query NOT LIKE '%pg_stat_statements%' ORDER BY calls DESC LIMIT 12`)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	var total float64
	for rows.Next() {
		var calls int64
		var ms float64
		var q string
		if err := rows.Scan(&calls, &ms, &q); err != nil {
			return "", err
		}
		total += float64(calls) / float64(ops)
		fmt.Fprintf(&b, "      %6.2f/op  %7.1f µs each  %.100s\n", float64(calls)/float64(ops), ms*1e3/float64(calls), q)
	}
	return fmt.Sprintf("    statements (pg_stat_statements, measured part + its tail): %.2f per operation\n", total) + b.String(), rows.Err()
}
