package service

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/agent"
	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/internal/loadgen"
	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/badgerstore"
)

// The go test -bench suite: the same operations as the load script, one
// figure each (ns/op is the inverse of the throughput with parallel
// benchmarks). The ratios, rounds and latencies are the load script's
// (TestServiceLoad, make bench).

// BenchmarkPrimitives measures the work the endpoints cannot avoid, in this
// process: the raw Ed25519 verification, the minimal server's work without
// HTTP (ParseChallenge + Verify), the three signatures of a code exchange (and
// each kind alone), and Badger's synced commit of one small transaction with
// 64 goroutines.
func BenchmarkPrimitives(b *testing.B) {
	b.Run("Ed25519Verify", func(b *testing.B) {
		parallelOps(b, verifyOp(b))
	})
	b.Run("ParseChallengeVerify", func(b *testing.B) {
		cfg := SeedConfig{Humans: 10, Agents: 100}
		reg, _ := verifyBodies(cfg, cfg.Owners(), 64, 0, 0)
		var n atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := int(n.Add(1))
			for pb.Next() {
				c, err := agent.ParseChallenge(reg[i%len(reg)])
				if err != nil || !c.Verify() {
					b.Errorf("ParseChallenge: %v", err)
					return
				}
				i++
			}
		})
	})
	s := newSigner(b)
	b.Run("ExchangeSignatures", func(b *testing.B) { parallelOps(b, s.sign3) })
	for _, c := range []struct {
		name string
		op   func(testing.TB) func() error
	}{{"SyncedCommit64", badgerCommits}, {"StoreCommit64", storeCommits}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetParallelism(max(1, 64/procs()))
			parallelOps(b, c.op(b))
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
		})
	}
}

// parallelOps runs op in b.RunParallel until b.N or its first error.
func parallelOps(b *testing.B, op func() error) {
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkMinimal measures the minimal verify/signature server in this
// process, 32 connections.
func BenchmarkMinimal(b *testing.B) {
	cfg := SeedConfig{Humans: 10, Agents: 100}
	reg, _ := verifyBodies(cfg, cfg.Owners(), 1000, 0, 0)
	host := startMinimal(b)
	var reqs [][]byte
	for _, body := range reg {
		reqs = append(reqs, loadgen.PostRequest(host, "/v1/agent/verify/signature", "application/json", body))
	}
	loadgen.ParallelRequests(b, host, reqs, 32)
}

// BenchmarkCaddy measures palmgate's endpoints through one Caddy on a copy of
// the seeded store (-seed.humans, -seed.agents; seeded and cached under
// -seed.cache when missing), started once for all its sub-benchmarks.
func BenchmarkCaddy(b *testing.B) {
	cfg := SeedConfig{Humans: *seedHumansFlag, Agents: *seedAgentsFlag}
	s := startSite(b, cfg, "ed25519")
	reg, unreg := verifyBodies(cfg, s.owners, 2000, 2000, 7)
	var regReqs, unregReqs, devReqs, keyReqs [][]byte
	for k := range reg {
		regReqs = append(regReqs, loadgen.PostRequest(s.host, "/v1/agent/verify/signature", "application/json", reg[k]))
		unregReqs = append(unregReqs, loadgen.PostRequest(s.host, "/v1/agent/verify/signature", "application/json", unreg[k]))
		i := (k*104729 + 17) % cfg.Agents
		der, _ := x509.MarshalPKIXPublicKey(AgentKey(i).Public().(ed25519.PublicKey))
		devReqs = append(devReqs, loadgen.GetRequest(s.host, "/v1/agent/verify/device/"+url.PathEscape(DeviceID(i))))
		keyReqs = append(keyReqs, loadgen.GetRequest(s.host, "/v1/agent/verify/public-key/"+base64.URLEncoding.EncodeToString(der)))
	}
	for _, c := range []struct {
		name string
		reqs [][]byte
	}{
		{"Static", [][]byte{loadgen.GetRequest(s.host, "/static")}},
		{"VerifySignatureRegistered", regReqs},
		{"VerifySignatureUnregistered", unregReqs},
		{"LookupDevice", devReqs},
		{"LookupPublicKey", keyReqs},
		{"Leaderboard", [][]byte{loadgen.GetRequest(s.host, "/v1/human/leaderboard")}},
	} {
		b.Run(c.name, func(b *testing.B) { loadgen.ParallelRequests(b, s.host, c.reqs, 32) })
	}
	b.Run("CodeExchange", func(b *testing.B) {
		// b.N codes minted first (not timed), each exchanged once.
		forms, err := s.mintCodes(b.N, 64)
		if err != nil {
			b.Fatal(err)
		}
		reqs := make([][]byte, len(forms))
		for i, f := range forms {
			reqs[i] = loadgen.PostRequest(s.host, "/oauth2/token", "application/x-www-form-urlencoded", f)
		}
		var next atomic.Int64
		b.ResetTimer()
		loadgen.ParallelConns(b, s.host, 32, func(c *loadgen.Conn) error {
			if code, err := c.RoundTrip(reqs[next.Add(1)-1]); err != nil || code != http.StatusOK {
				return fmt.Errorf("token: %d %v", code, err)
			}
			return nil
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "exchanges/s")
	})
	b.Run("Registration64", func(b *testing.B) {
		// Init, owner's page, attestor's assertion; 64 agents at once. The agent's
		// key and signed init are made inside the timed loop.
		run := randHex(3)
		var seq atomic.Int64
		loadgen.ParallelConns(b, s.host, 64, func(c *loadgen.Conn) error {
			return s.register(c, newRegistration(cfg, run, int(seq.Add(1))))
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "registrations/s")
	})
}

// BenchmarkCore measures core/agent's read paths in this process, without HTTP
// or Caddy, on a copy of the seeded store: what each endpoint costs beyond its
// signature check, and Badger's point read alone (a hit and a miss).
func BenchmarkCore(b *testing.B) {
	cfg := SeedConfig{Humans: *seedHumansFlag, Agents: *seedAgentsFlag}
	dir := filepath.Join(b.TempDir(), "palmgate")
	if err := copyStore(seededStore(b, cfg), dir); err != nil {
		b.Fatal(err)
	}
	store, err := badgerstore.Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	pub, _, _ := ed25519.GenerateKey(nil)
	ps, err := palm.NewService(palm.Config{Store: store, Issuer: "http://127.0.0.1", Attestors: []palm.Attestor{{Name: AttestorName, Key: pub}}})
	if err != nil {
		b.Fatal(err)
	}
	as := agent.NewService(agent.Config{Store: store, Palm: ps, Issuer: "http://127.0.0.1", SessionTTL: time.Minute, ChallengeMaxAge: time.Minute})
	owners := cfg.Owners()
	n := requestSample // as the load script: more blocks than Badger's block cache holds
	reg, unreg := verifyBodies(cfg, owners, n, n, 3)
	parse := func(bodies [][]byte) []*agent.Challenge {
		out := make([]*agent.Challenge, len(bodies))
		for i, body := range bodies {
			if out[i], err = agent.ParseChallenge(body); err != nil {
				b.Fatal(err)
			}
		}
		return out
	}
	regC, unregC := parse(reg), parse(unreg)
	ctx := context.Background()
	sample := func(k int) int { return int(uint64(k)*0x9E3779B97F4A7C15>>11) % cfg.Agents }
	keys := make([]ed25519.PublicKey, n)
	for k := range keys {
		keys[k] = AgentKey(sample(k)).Public().(ed25519.PublicKey)
	}
	run := func(name string, op func(k int) error) {
		b.Run(name, func(b *testing.B) {
			var seq atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				k := int(seq.Add(1)) * 7919
				for pb.Next() {
					if err := op(k % n); err != nil {
						b.Error(err)
						return
					}
					k++
				}
			})
		})
	}
	get := func(key []byte, want bool) error {
		return store.View(ctx, func(txn storage.Txn) error {
			_, err := txn.Get(key)
			if (err == nil) != want {
				return fmt.Errorf("Get %s: %v", key, err)
			}
			return nil
		})
	}
	run("BadgerGetHit", func(k int) error { return get(deviceKey(DeviceID(sample(k))), true) })
	run("BadgerGetMiss", func(k int) error { return get(deviceKey(fmt.Sprintf("bench-unregistered-%d", k)), false) })
	run("VerifySignatureRegistered", func(k int) error {
		c, err := as.VerifySignature(ctx, regC[k])
		if err == nil && !c.Registered {
			err = fmt.Errorf("not registered")
		}
		return err
	})
	run("VerifySignatureUnregistered", func(k int) error { _, err := as.VerifySignature(ctx, unregC[k]); return err })
	run("LookupDevice", func(k int) error { _, err := as.LookupDevice(ctx, DeviceID(sample(k))); return err })
	run("LookupPublicKey", func(k int) error { _, err := as.LookupPublicKey(ctx, keys[k]); return err })
	run("Leaderboard", func(int) error { _, err := as.Leaderboard(ctx, 100); return err })
	run("LeaderboardJSON", func(int) error {
		e, err := as.Leaderboard(ctx, 100)
		if err == nil {
			_, err = json.Marshal(e)
		}
		return err
	})
}
