package service

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"io"
	"net/http"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/palmgate/palmgate/bench/minimal"
	"github.com/palmgate/palmgate/core/agent"
	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/edge"
	"github.com/palmgate/palmgate/storage/memstore"
)

// BenchmarkHandler measures verify/signature's handler alone, in this process,
// with no connection, no HTTP parsing and no Caddy: the minimal server's handler
// (bench/minimal) against palmgate's edge.Server, on the same bodies of
// registered agents whose keys palmgate has seen (its caches warm, as in the
// steady state of the load script's verify-reg). "interleaved" runs the two in
// turn and times each by its thread's CPU time, the figure a shared machine
// disturbs least: palmgate/minimal is what palmgate's handler costs against the
// minimal one's, with Caddy's own cost (the load script's static - ok-proc) the
// rest of the difference through Caddy.
//
//	go test -run '^$' -bench BenchmarkHandler -benchtime 3000x -count 6 ./bench/service
func BenchmarkHandler(b *testing.B) {
	cfg := SeedConfig{Humans: 10, Agents: 256}
	store := memstore.New()
	ctx := context.Background()
	if err := SeedStore(ctx, store, cfg, nil); err != nil {
		b.Fatal(err)
	}
	pub, _, _ := ed25519.GenerateKey(nil)
	ps, err := palm.NewService(palm.Config{Store: store, Issuer: "http://127.0.0.1", Attestors: []palm.Attestor{{Name: AttestorName, Key: pub}}})
	if err != nil {
		b.Fatal(err)
	}
	as := agent.NewService(agent.Config{Store: store, Palm: ps, Issuer: "http://127.0.0.1", SessionTTL: time.Minute, ChallengeMaxAge: time.Minute})
	pg := edge.New(edge.Config{Issuer: "http://127.0.0.1", Palm: ps, Agents: as})
	reg, _ := verifyBodies(cfg, cfg.Owners(), cfg.Agents, 0, 0)
	handlers := []struct {
		name string
		h    http.Handler
		want string
	}{
		{"minimal", minimal.Handler(), `{"verified":true,"registered":false}` + "\n"},
		{"palmgate", pg, `{"verified":true,"registered":true}` + "\n"},
	}
	serve := func(h http.Handler, body []byte, w *discardWriter) {
		r, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1/v1/agent/verify/signature", nil)
		r.Header.Set("Content-Type", "application/json")
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		w.reset()
		h.ServeHTTP(w, r)
	}
	var w discardWriter
	for _, c := range handlers {
		for _, body := range reg { // warms palmgate's caches; checks the answers
			serve(c.h, body, &w)
			if w.status != http.StatusOK || w.body.String() != c.want {
				b.Fatalf("%s: %d %s", c.name, w.status, w.body.String())
			}
		}
	}
	for _, c := range handlers {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				serve(c.h, reg[i%len(reg)], &w)
				i++
			}
		})
	}
	// Both in turn, the same body each, each timed by the CPU time of this
	// goroutine's thread: what other processes on a shared machine disturb far
	// less than the wall clock of ns/op, and a ratio of the two measured at the
	// same moments.
	b.Run("interleaved", func(b *testing.B) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var cpu [2]time.Duration
		i := 0
		for b.Loop() {
			for k, c := range handlers {
				t0 := threadCPU()
				serve(c.h, reg[i%len(reg)], &w)
				cpu[k] += threadCPU() - t0
			}
			i++
		}
		b.ReportMetric(float64(cpu[0])/float64(b.N), "minimal-cpu-ns/op")
		b.ReportMetric(float64(cpu[1])/float64(b.N), "palmgate-cpu-ns/op")
		b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "palmgate/minimal")
	})
}

// threadCPU is the CPU time the calling OS thread has used.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rusageThread is Linux's RUSAGE_THREAD.
const rusageThread = 1

// discardWriter is an http.ResponseWriter that keeps the status and body of the
// last answer and reuses its header map.
type discardWriter struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func (w *discardWriter) reset() {
	if w.h == nil {
		w.h = make(http.Header)
	}
	clear(w.h)
	w.status = 0
	w.body.Reset()
}
func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(code int)        { w.status = code }
func (w *discardWriter) Write(p []byte) (int, error) { return w.body.Write(p) }
