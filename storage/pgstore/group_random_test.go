package pgstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/pgtest"
	"github.com/palmgate/palmgate/storage"
)

// The randomized test of grouped commits: many goroutines run random Updates on a
// few keys through one store, each Update recording what its last run read; then
// the outcomes must be those of running the same Updates one after the other in
// some order, which the reads themselves give.
//
// Each logical key i is two records: r/k/i holds "<version>:<op>" and r/t/i, the
// tombstone of a delete, holds "<version>". Every op that writes or deletes key i
// reads it first and writes the version it read plus one, so the versions order
// the writers of each key, and a read of version v falls between the writers of
// v and v+1. Lost updates show as two committed writers of one version, dirty
// reads as a version no committed op wrote, and anomalies as a cycle among these
// orders. A serial replay, in an order that respects them all, of the same ops on
// a map must then reproduce every op's reads and outcome and the final state.

const randKeys = 8

// errSkip is the outcome of a conditional op whose condition failed.
var errSkip = errors.New("condition not met")

// randOp is one random Update: kind and its keys. It is a function of what it
// reads, so that a replay can run it again.
type randOp struct {
	id   int
	kind int // see run
	a, b int
}

const randKinds = 7

// randKV is what an op sees: the store's transaction, or the replay's map.
type randKV interface {
	get(key string) (string, bool, error)
	set(key, value string) error
	del(key string) error
	keys(prefix string) ([]string, error) // the live keys under prefix, in order
}

// observed is what one run of an op read: each logical key's version.
type observed map[int]int

// read returns key i's version (0 when never written) and records it.
func (o observed) read(kv randKV, i int) (int, error) {
	v, ok, err := kv.get(fmt.Sprintf("r/k/%d", i))
	if err != nil {
		return 0, err
	}
	ver := 0
	if ok {
		if ver, err = strconv.Atoi(strings.SplitN(v, ":", 2)[0]); err != nil {
			return 0, fmt.Errorf("r/k/%d = %q", i, v)
		}
	}
	t, ok, err := kv.get(fmt.Sprintf("r/t/%d", i))
	if err != nil {
		return 0, err
	}
	if ok {
		tv, err := strconv.Atoi(t)
		if err != nil {
			return 0, fmt.Errorf("r/t/%d = %q", i, t)
		}
		ver = max(ver, tv)
	}
	o[i] = ver
	return ver, nil
}

// write sets key i to the version after the one read.
func (o observed) write(kv randKV, op *randOp, i int) error {
	ver, err := o.read(kv, i)
	if err != nil {
		return err
	}
	return kv.set(fmt.Sprintf("r/k/%d", i), fmt.Sprintf("%d:%d", ver+1, op.id))
}

// run runs op on kv, recording its reads in o.
func (op *randOp) run(kv randKV, o observed) error {
	switch op.kind {
	case 0: // read a, write b
		if _, err := o.read(kv, op.a); err != nil {
			return err
		}
		return o.write(kv, op, op.b)
	case 1: // write a
		return o.write(kv, op, op.a)
	case 2: // delete a
		ver, err := o.read(kv, op.a)
		if err != nil {
			return err
		}
		if err := kv.del(fmt.Sprintf("r/k/%d", op.a)); err != nil {
			return err
		}
		return kv.set(fmt.Sprintf("r/t/%d", op.a), strconv.Itoa(ver+1))
	case 3: // write b if a's version is even, else fail
		ver, err := o.read(kv, op.a)
		if err != nil {
			return err
		}
		if ver%2 == 1 {
			return errSkip
		}
		return o.write(kv, op, op.b)
	case 4: // read a and b
		if _, err := o.read(kv, op.a); err != nil {
			return err
		}
		_, err := o.read(kv, op.b)
		return err
	case 5: // iterate, read every key (so that its version orders the op), then write b
		keys, err := kv.keys("r/k/")
		if err != nil {
			return err
		}
		for i := range randKeys {
			if _, err := o.read(kv, i); err != nil {
				return err
			}
			_, live, err := kv.get(fmt.Sprintf("r/k/%d", i))
			if err != nil {
				return err
			}
			if slices.Contains(keys, fmt.Sprintf("r/k/%d", i)) != live {
				return fmt.Errorf("iterating listed %v, and r/k/%d is live: %v", keys, i, live)
			}
		}
		return o.write(kv, op, op.b)
	case 6: // write a and b (two keys)
		if err := o.write(kv, op, op.a); err != nil {
			return err
		}
		return o.write(kv, op, op.b)
	}
	panic("unknown op kind")
}

// writes lists the keys op writes when its reads were o (for the checks below).
func (op *randOp) writes(o observed) []int {
	switch op.kind {
	case 0, 5:
		return []int{op.b}
	case 1, 2:
		return []int{op.a}
	case 3:
		if o[op.a]%2 == 1 {
			return nil
		}
		return []int{op.b}
	case 6:
		return []int{op.a, op.b}
	}
	return nil
}

// txnKV is a storage.Txn as a randKV.
type txnKV struct{ tx storage.Txn }

func (k txnKV) get(key string) (string, bool, error) {
	v, err := k.tx.Get([]byte(key))
	if errors.Is(err, storage.ErrNotFound) {
		return "", false, nil
	}
	return string(v), err == nil, err
}
func (k txnKV) set(key, value string) error { return k.tx.Set([]byte(key), []byte(value), 0) }
func (k txnKV) del(key string) error        { return k.tx.Delete([]byte(key)) }
func (k txnKV) keys(prefix string) ([]string, error) {
	var keys []string
	err := k.tx.IterateKeys([]byte(prefix), func(key []byte) (bool, error) {
		keys = append(keys, string(key))
		return true, nil
	})
	return keys, err
}

// mapKV is the serial replay's state.
type mapKV map[string]string

func (m mapKV) get(key string) (string, bool, error) { v, ok := m[key]; return v, ok, nil }
func (m mapKV) set(key, value string) error          { m[key] = value; return nil }
func (m mapKV) del(key string) error                 { delete(m, key); return nil }
func (m mapKV) keys(prefix string) ([]string, error) {
	var keys []string
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys, nil
}

// randomSeed is PALMGATE_SEED, or a new seed.
func randomSeed(t *testing.T) uint64 {
	if s := os.Getenv("PALMGATE_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("PALMGATE_SEED=%q: %v", s, err)
		}
		return seed
	}
	return rand.Uint64()
}

// TestGroupRandomSerial runs random Updates on a few keys through one store with
// grouped commits, and checks every outcome against a serial replay of the same
// Updates (see the top of this file). The ops are drawn from the seed it logs
// (PALMGATE_SEED=<seed> draws them again; the interleaving is the machine's).
func TestGroupRandomSerial(t *testing.T) {
	seed := randomSeed(t)
	t.Logf("seed %d (PALMGATE_SEED=%d to draw the same ops)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	s := closeT(t, openT(t, config(t, pgtest.DSN(t))))
	const workers, each = 16, 30
	ops := make([][]*randOp, workers)
	for w := range ops {
		for range each {
			op := &randOp{id: len(ops[w]) + w*each + 1, kind: rng.IntN(randKinds), a: rng.IntN(randKeys), b: rng.IntN(randKeys)}
			if op.kind == 6 && op.a == op.b {
				op.b = (op.a + 1) % randKeys // its second write would read its first
			}
			ops[w] = append(ops[w], op)
		}
	}
	seen := make(map[int]observed)
	outcome := make(map[int]error)
	var mu sync.Mutex
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for _, op := range ops[w] {
				var o observed
				err := s.Update(ctx, func(tx storage.Txn) error {
					o = observed{} // the last run's reads are the outcome's
					return op.run(txnKV{tx}, o)
				})
				mu.Lock()
				seen[op.id], outcome[op.id] = o, err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if st := s.Stats(); st.Groups == 0 || st.Grouped == 0 {
		t.Errorf("Stats = %+v: no group committed, so nothing was tested", st)
	} else {
		t.Logf("stats: %+v", st)
	}

	// The committed ops, their writes, and which op wrote each version of a key.
	all := slices.Concat(ops...)
	byID := map[int]*randOp{}
	writer := map[[2]int]int{} // {key, version} -> op id
	var committed []*randOp
	for _, op := range all {
		byID[op.id] = op
		switch err := outcome[op.id]; {
		case err == nil:
			committed = append(committed, op)
			for _, k := range op.writes(seen[op.id]) {
				kv := [2]int{k, seen[op.id][k] + 1}
				if other, ok := writer[kv]; ok {
					t.Fatalf("ops %d and %d both committed version %d of key %d (a lost update)", other, op.id, kv[1], k)
				}
				writer[kv] = op.id
			}
		case errors.Is(err, errSkip):
		default:
			t.Fatalf("op %d (%+v): %v", op.id, *op, err)
		}
	}
	// Every version read was committed by someone (no dirty read), failed ops' included.
	for _, op := range all {
		for k, v := range seen[op.id] {
			if _, ok := writer[[2]int{k, v}]; v > 0 && !ok {
				t.Fatalf("op %d read version %d of key %d, which no committed op wrote", op.id, v, k)
			}
		}
	}
	// The order: the writer of version v of a key before its readers and the writer
	// of v+1; the readers of v before the writer of v+1.
	after := map[int][]int{}
	indeg := map[int]int{}
	edge := func(from, to int) {
		if from != to {
			after[from] = append(after[from], to)
			indeg[to]++
		}
	}
	for kv, id := range writer {
		if prev, ok := writer[[2]int{kv[0], kv[1] - 1}]; ok {
			edge(prev, id)
		} else if kv[1] > 1 {
			t.Fatalf("version %d of key %d committed, version %d not", kv[1], kv[0], kv[1]-1)
		}
	}
	for _, op := range committed {
		for k, v := range seen[op.id] {
			if w, ok := writer[[2]int{k, v}]; ok {
				edge(w, op.id)
			}
			if next, ok := writer[[2]int{k, v + 1}]; ok {
				edge(op.id, next)
			}
		}
	}
	var order, ready []int
	for _, op := range committed {
		if indeg[op.id] == 0 {
			ready = append(ready, op.id)
		}
	}
	for len(ready) > 0 {
		id := ready[0]
		ready = ready[1:]
		order = append(order, id)
		for _, next := range after[id] {
			if indeg[next]--; indeg[next] == 0 {
				ready = append(ready, next)
			}
		}
	}
	if len(order) != len(committed) {
		t.Fatalf("the committed ops' reads and writes order them in a cycle: no serial order gives them (%d of %d ordered)", len(order), len(committed))
	}

	// The serial replay, in that order.
	state := mapKV{}
	for _, id := range order {
		op := byID[id]
		o := observed{}
		if err := op.run(state, o); err != nil {
			t.Fatalf("op %d (%+v) fails in the serial replay: %v, committed in the store", id, *op, err)
		}
		if !maps.Equal(o, seen[id]) {
			t.Fatalf("op %d (%+v) reads %v in the serial replay, read %v in the store", id, *op, o, seen[id])
		}
	}
	stored := mapKV{}
	if err := s.View(ctx, func(tx storage.Txn) error {
		return tx.Iterate([]byte("r/"), func(k, v []byte) (bool, error) {
			stored[string(k)] = string(v)
			return true, nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(stored, state) {
		t.Fatalf("the store holds %v, the serial replay %v", stored, state)
	}
	t.Logf("%d ops: %d committed, %d skipped by their condition", len(all), len(committed), len(all)-len(committed))
}
