package loadgen

import (
	"bytes"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// ParallelRequests runs b.RunParallel with about conns keep-alive connections
// to host (b.SetParallelism; one per goroutine), each sending reqs in turn from
// its own offset and expecting 200, and reports req/s.
func ParallelRequests(b *testing.B, host string, reqs [][]byte, conns int) {
	b.SetParallelism(max(1, conns/runtime.GOMAXPROCS(0)))
	var seq atomic.Int64
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		c, err := Dial(host)
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		i := int(seq.Add(1)) * 7919
		for pb.Next() {
			req := reqs[i%len(reqs)]
			if code, err := c.RoundTrip(req); err != nil || code != http.StatusOK {
				line, _, _ := bytes.Cut(req, []byte("\r\n"))
				b.Errorf("%s: status %d: %v", line, code, err)
				return
			}
			i++
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}
