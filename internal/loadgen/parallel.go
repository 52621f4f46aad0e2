package loadgen

import (
	"bytes"
	"fmt"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// ParallelConns runs b.RunParallel with about conns goroutines
// (b.SetParallelism), each with a keep-alive connection of its own to host, and
// calls op with it once per iteration; the first error fails the benchmark.
func ParallelConns(b *testing.B, host string, conns int, op func(*Conn) error) {
	b.SetParallelism(max(1, conns/runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		c, err := Dial(host)
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		for pb.Next() {
			if err := op(c); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// ParallelRequests sends reqs in turn over about conns keep-alive connections
// to host (ParallelConns), expecting 200 for each, and reports req/s.
func ParallelRequests(b *testing.B, host string, reqs [][]byte, conns int) {
	var seq atomic.Int64
	start := time.Now()
	ParallelConns(b, host, conns, func(c *Conn) error {
		req := reqs[int(seq.Add(1)-1)%len(reqs)]
		if code, err := c.RoundTrip(req); err != nil || code != http.StatusOK {
			line, _, _ := bytes.Cut(req, []byte("\r\n"))
			return fmt.Errorf("%s: status %d: %v", line, code, err)
		}
		return nil
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}
