package loadgen

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// testServer answers the responses the reader must find the end of.
func testServer(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /length", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello") // small and unflushed: net/http sets Content-Length
	})
	mux.HandleFunc("GET /chunked", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hel")
		w.(http.Flusher).Flush() // the length is unknown once the headers are out
		io.WriteString(w, strings.Repeat("lo", 5000))
	})
	mux.HandleFunc("GET /trailer", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		io.WriteString(w, "body")
		w.(http.Flusher).Flush()
		w.Header().Set("X-Sum", "4")
	})
	mux.HandleFunc("GET /missing", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such thing", http.StatusNotFound)
	})
	mux.HandleFunc("GET /redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/length?from=redirect", http.StatusFound)
	})
	mux.HandleFunc("GET /close", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "bye")
	})
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Header.Get("Content-Type"), r.Header.Get("X-Extra"), body)
	})
	mux.HandleFunc("GET /header", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get("Authorization"))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// TestConn checks that Do and RoundTrip find the end of each kind of response:
// the status, the Location and the body are right, and the next request on
// the same connection gets its own response.
func TestConn(t *testing.T) {
	host := testServer(t)
	for _, tc := range []struct {
		name     string
		req      []byte
		code     int
		location string
		body     string
		err      error
	}{
		{name: "content-length", req: GetRequest(host, "/length"), code: 200, body: "hello"},
		{name: "chunked", req: GetRequest(host, "/chunked"), code: 200, body: "hel" + strings.Repeat("lo", 5000)},
		{name: "chunked with trailer", req: GetRequest(host, "/trailer"), code: 200, body: "body"},
		{name: "not found", req: GetRequest(host, "/missing"), code: 404, body: "no such thing\n"},
		{name: "redirect", req: GetRequest(host, "/redirect"), code: 302, location: "/length?from=redirect",
			body: "<a href=\"/length?from=redirect\">Found</a>.\n\n"},
		{name: "header", req: GetRequest(host, "/header", "Authorization: Bearer tok"), code: 200, body: "Bearer tok"},
		{name: "post", req: PostRequest(host, "/echo", "application/json", []byte(`{"a":1}`)), code: 200,
			body: `application/json  {"a":1}`},
		{name: "connection close", req: GetRequest(host, "/close"), code: 200, body: "bye", err: ErrConnClose},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Dial(host)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			code, location, body, err := c.Do(tc.req)
			if code != tc.code || location != tc.location || string(body) != tc.body || !errors.Is(err, tc.err) {
				t.Fatalf("Do: %d %q %q %v, want %d %q %q %v", code, location, body, err, tc.code, tc.location, tc.body, tc.err)
			}
			if tc.err != nil {
				return
			}
			if code, err := c.RoundTrip(tc.req); code != tc.code || err != nil {
				t.Fatalf("RoundTrip: %d %v, want %d", code, err, tc.code)
			}
			// Both responses were read to their end: the next one is whole.
			if code, _, body, err := c.Do(GetRequest(host, "/length")); code != 200 || string(body) != "hello" || err != nil {
				t.Fatalf("the next request: %d %q %v, want 200 \"hello\"", code, body, err)
			}
		})
	}
}

// TestRun checks the warm-up, the pool and the error of a Run.
func TestRun(t *testing.T) {
	var warm, measured atomic.Int64
	pool := func(n int64) Op {
		return func(w bool) error {
			if w {
				warm.Add(1)
				time.Sleep(time.Millisecond)
				return nil
			}
			if measured.Add(1) > n {
				return ErrPoolDone
			}
			time.Sleep(time.Millisecond)
			return nil
		}
	}
	res, err := Run([]Op{pool(50), pool(50)}, Options{Warmup: 50 * time.Millisecond, Duration: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if warm.Load() == 0 || res.Ops != 50 || res.PoolExhaustedAt <= 0 || res.Elapsed <= 0 || res.Elapsed > 5*time.Second ||
		res.P50 <= 0 || res.P99 < res.P50 {
		t.Fatalf("warm-up ops %d, result %+v: want warm-up ops, 50 measured ops and an exhausted pool", warm.Load(), res)
	}

	boom := errors.New("boom")
	_, err = Run([]Op{func(bool) error { return boom }}, Options{Duration: time.Second})
	if !errors.Is(err, boom) {
		t.Fatalf("Run with a failing op: %v, want %v", err, boom)
	}
}

func TestMedianRotate(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    []float64
		want float64
	}{{"none", nil, 0}, {"odd", []float64{3, 1, 2}, 2}, {"even", []float64{4, 1, 3, 2}, 2.5}} {
		if got := Median(tc.v); got != tc.want {
			t.Errorf("%s: Median(%v) = %v, want %v", tc.name, tc.v, got, tc.want)
		}
	}
	if got := fmt.Sprint(Rotate([]int{1, 2, 3}, 4)); got != "[2 3 1]" {
		t.Errorf("Rotate([1 2 3], 4) = %s, want [2 3 1]", got)
	}
}

// TestWaitIdle: a process busy for a while is waited for, one that stays busy is
// given up on after max, an idle one is not waited for.
func TestWaitIdle(t *testing.T) {
	const window = 500 * time.Millisecond
	// sampler returns samples window apart; the process uses busy[i] cores in
	// the i-th window (and none after the list).
	sampler := func(busy ...float64) func() CPUSample {
		var s CPUSample
		s.At = time.Unix(1e9, 0)
		i := -1
		return func() CPUSample {
			if i >= 0 {
				s.At = s.At.Add(window)
				if i < len(busy) {
					s.Process += time.Duration(busy[i] * float64(window))
				}
			}
			i++
			return s
		}
	}
	noSleep := func(time.Duration) {}
	for _, c := range []struct {
		name   string
		busy   []float64
		waited time.Duration
		idle   bool
	}{
		{"idle", nil, window, true},
		{"busy for three windows", []float64{1, 0.8, 0.3, 0.01}, 4 * window, true},
		{"busy throughout", []float64{1, 1, 1, 1, 1, 1, 1, 1}, 4 * window, false},
	} {
		waited, idle := waitIdle(sampler(c.busy...), noSleep, 0.05, window, 4*window)
		if waited != c.waited || idle != c.idle {
			t.Errorf("%s: waited %s, idle %v; want %s, %v", c.name, waited, idle, c.waited, c.idle)
		}
	}
}

// TestRatioText: a ratio just under its goal is not rounded up to it.
func TestRatioText(t *testing.T) {
	for _, c := range []struct {
		x, want float64
		text    string
	}{{0.795, 0.80, "0.795"}, {0.7951, 0.80, "0.795"}, {0.7949, 0.80, "0.79"}, {0.81, 0.80, "0.81"}, {0.80, 0.80, "0.80"}, {0.904, 0.90, "0.90"}, {0.72, 0.80, "0.72"}} {
		if got := RatioText(c.x, c.want); got != c.text {
			t.Errorf("RatioText(%v, %v) = %q; want %q", c.x, c.want, got, c.text)
		}
	}
}
