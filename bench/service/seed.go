package service

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/palmgate/palmgate/core/agent"
	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/badgerstore"
)

// SeedLayoutVersion names the record layout Seed writes; a cached data directory
// seeded with another version is not reused. Version 2: the key index holds the
// deviceId, 0x00 and a copy of the agent record.
const SeedLayoutVersion = 2

// AttestorName is the palm attestor of the seeded humans: palm/h/ entries are
// keyed by it, so a real assertion of this attestor for PalmSubject(j) maps to
// seeded human j.
const AttestorName = "bench-engine"

// SeedConfig says what Seed writes. The data is a pure function of it.
type SeedConfig struct {
	Humans int // humans, each with at least one agent
	Agents int // agents in all (>= Humans)
}

// Dirname is the name of the cached directory of c.
func (c SeedConfig) Dirname() string {
	return fmt.Sprintf("seed-v%d-h%d-a%d", SeedLayoutVersion, c.Humans, c.Agents)
}

// seedBase is the registration time of agent 0; agent i registered 15 s after
// agent i-1 (1M agents span 174 days).
var seedBase = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

const seedStep = 15 * time.Second

// DeviceID is the deviceId of seeded agent i.
func DeviceID(i int) string { return fmt.Sprintf("bench-agent-%07d", i) }

// AgentKey is the Ed25519 key of seeded agent i.
func AgentKey(i int) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("palmgate-bench-agent:" + strconv.Itoa(i)))
	return ed25519.NewKeyFromSeed(seed[:])
}

// RegisteredAt is the registration time of seeded agent i.
func RegisteredAt(i int) time.Time { return seedBase.Add(time.Duration(i) * seedStep) }

// HumanID is the humanId of seeded human j: a version 4 uuid from fixed bytes.
func HumanID(j int) string {
	sum := sha256.Sum256([]byte("palmgate-bench-human:" + strconv.Itoa(j)))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	u, _ := uuid.FromBytes(b)
	return u.String()
}

// PalmSubject is the palm subject the bench attestor names seeded human j by.
func PalmSubject(j int) string { return "bench-palm-" + strconv.Itoa(j) }

// Owners returns the human owning each seeded agent: agent j < Humans belongs to
// human j (every human has one), the others are spread by a Zipf law (a few
// humans own thousands of agents, most own a handful), from a fixed seed.
func (c SeedConfig) Owners() []int32 {
	owners := make([]int32, c.Agents)
	r := rand.New(rand.NewPCG(20260101, uint64(c.Humans)))
	z := rand.NewZipf(r, 1.3, 20, uint64(c.Humans-1))
	// Zipf rank k -> a fixed pseudo-random human, so the top humans are not the
	// earliest registered ones.
	perm := r.Perm(c.Humans)
	for i := range owners {
		if i < c.Humans {
			owners[i] = int32(i)
		} else {
			owners[i] = int32(perm[z.Uint64()])
		}
	}
	return owners
}

// Entry is one leaderboard entry as the API answers it.
type Entry struct {
	HumanID              string `json:"humanId"`
	AgentCount           int64  `json:"agentCount"`
	EarliestRegisteredAt string `json:"earliestRegisteredAt"`
}

// Leaderboard is the expected top n of the leaderboard of the seeded data.
func (c SeedConfig) Leaderboard(owners []int32, n int) []Entry {
	counts := make([]int64, c.Humans)
	for _, h := range owners {
		counts[h]++
	}
	idx := make([]int, c.Humans)
	for j := range idx {
		idx[j] = j
	}
	// Human j's first agent is agent j: earliest registration order is j order.
	slices.SortFunc(idx, func(a, b int) int {
		if counts[a] != counts[b] {
			if counts[a] > counts[b] {
				return -1
			}
			return 1
		}
		return a - b
	})
	out := make([]Entry, 0, n)
	for _, j := range idx[:min(n, len(idx))] {
		out = append(out, Entry{HumanID: HumanID(j), AgentCount: counts[j], EarliestRegisteredAt: agent.Time(RegisteredAt(j)).Format()})
	}
	return out
}

// The keys below are core/agent's and core/palm's documented layout
// (core/agent/keys.go, core/palm/keys.go), which those packages do not export.
func deviceKey(id string) []byte     { return []byte("agent/d/" + id) }
func publicKeyKey(k []byte) []byte   { return []byte("agent/k/" + hex.EncodeToString(k)) }
func humanKey(humanID string) []byte { return []byte("agent/h/" + humanID) }
func leaderboardKey(count int64, earliest time.Time, humanID string) []byte {
	k := []byte("agent/lb/")
	k = binary.BigEndian.AppendUint64(k, math.MaxUint64-uint64(count))
	k = binary.BigEndian.AppendUint64(k, uint64(earliest.UnixMilli()))
	return append(k, humanID...)
}
func palmHumanKey(attestor, subject string) []byte {
	h := sha256.New()
	h.Write([]byte(attestor))
	h.Write([]byte{0})
	h.Write([]byte(subject))
	return h.Sum([]byte("palm/h/"))
}

// humanStats is core/agent's record of a human (agent/h/), with the same JSON.
type humanStats struct {
	AgentCount int64     `json:"agentCount"`
	Earliest   time.Time `json:"earliest"`
}

// Seed writes the agents and humans of c into the Badger store at dir (which
// must not be open elsewhere) in large transactions, record for record as
// core/agent's registration and core/palm's first verification of a human write
// them: agent/d/, agent/k/, agent/h/, agent/lb/ and palm/h/ (for AttestorName).
// progress, if not nil, is called after each transaction with the agents written.
func Seed(ctx context.Context, dir string, c SeedConfig, progress func(done int)) error {
	if c.Humans < 1 || c.Agents < c.Humans {
		return fmt.Errorf("seed: need 1 <= humans <= agents, got %d humans and %d agents", c.Humans, c.Agents)
	}
	store, err := badgerstore.Open(dir, nil)
	if err != nil {
		return err
	}
	if err := SeedStore(ctx, store, c, progress); err != nil {
		store.Close()
		return err
	}
	return store.Close()
}

// SeedStore writes the records of Seed into an open store of any backend (a
// PostgreSQL database through storage/pgstore, say), in the same transactions.
func SeedStore(ctx context.Context, store storage.Store, c SeedConfig, progress func(done int)) error {
	if c.Humans < 1 || c.Agents < c.Humans {
		return fmt.Errorf("seed: need 1 <= humans <= agents, got %d humans and %d agents", c.Humans, c.Agents)
	}
	owners := c.Owners()
	if err := seedAgents(ctx, store, c, owners, progress); err != nil {
		return err
	}
	return seedHumans(ctx, store, c, owners)
}

// agentBatch is how many agents one transaction writes: two records of about
// 250 bytes each, well under badgerstore's 2.4 MiB transaction limit.
const agentBatch = 3000

type agentRecord struct{ dkey, dval, kkey, kval []byte }

func seedAgents(ctx context.Context, store storage.Store, c SeedConfig, owners []int32, progress func(int)) error {
	batches := (c.Agents + agentBatch - 1) / agentBatch
	type batch struct {
		n    int
		recs []agentRecord
		err  error
	}
	// Workers derive the keys (the costly part) batch by batch; results are
	// committed in order by this goroutine.
	workers := max(1, runtime.GOMAXPROCS(0))
	results := make([]chan batch, batches)
	for b := range results {
		results[b] = make(chan batch, 1)
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for b := range next {
				lo, hi := b*agentBatch, min((b+1)*agentBatch, c.Agents)
				out := batch{n: hi}
				for i := lo; i < hi; i++ {
					pub := AgentKey(i).Public().(ed25519.PublicKey)
					val, err := json.Marshal(agent.Registered{
						PublicKey: agent.EncodePublicKey(pub), HumanID: HumanID(int(owners[i])), RegisteredAt: agent.Time(RegisteredAt(i)),
					})
					if err != nil {
						out.err = err
						break
					}
					id := DeviceID(i)
					out.recs = append(out.recs, agentRecord{deviceKey(id), val, publicKeyKey(pub), append(append([]byte(id), 0), val...)})
				}
				results[b] <- out
			}
		})
	}
	go func() {
		defer close(next)
		for b := range batches {
			select {
			case next <- b:
			case <-ctx.Done():
				return
			}
		}
	}()
	defer wg.Wait()
	for b := range batches {
		var res batch
		select {
		case res = <-results[b]:
		case <-ctx.Done():
			return ctx.Err()
		}
		if res.err != nil {
			return res.err
		}
		err := store.Update(ctx, func(txn storage.Txn) error {
			for _, r := range res.recs {
				if err := txn.Set(r.dkey, r.dval, 0); err != nil {
					return err
				}
				if err := txn.Set(r.kkey, r.kval, 0); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("seeding agents: %w", err)
		}
		if progress != nil {
			progress(res.n)
		}
	}
	return nil
}

const humanBatch = 5000

func seedHumans(ctx context.Context, store storage.Store, c SeedConfig, owners []int32) error {
	counts := make([]int64, c.Humans)
	for _, h := range owners {
		counts[h]++
	}
	for lo := 0; lo < c.Humans; lo += humanBatch {
		hi := min(lo+humanBatch, c.Humans)
		err := store.Update(ctx, func(txn storage.Txn) error {
			for j := lo; j < hi; j++ {
				id := HumanID(j)
				earliest := RegisteredAt(j) // human j's first agent is agent j
				b, err := json.Marshal(humanStats{AgentCount: counts[j], Earliest: earliest})
				if err != nil {
					return err
				}
				if err := txn.Set(humanKey(id), b, 0); err != nil {
					return err
				}
				if err := txn.Set(leaderboardKey(counts[j], earliest, id), nil, 0); err != nil {
					return err
				}
				if err := txn.Set(palmHumanKey(AttestorName, PalmSubject(j)), []byte(id), 0); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("seeding humans: %w", err)
		}
	}
	return nil
}
