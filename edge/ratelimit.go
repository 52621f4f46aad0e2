package edge

import (
	"math"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/palmgate/palmgate/core/fault"
)

// maxTrackedClients bounds the memory of the rate limiter; past it, idle clients
// are forgotten first, and if none is idle the new client shares a common bucket.
const maxTrackedClients = 100000

// limiter bounds unauthenticated writes per client address (as the server's ClientIP
// determines it: Caddy's, honouring trusted_proxies; an IPv6 client by its /64): a token bucket
// of `requests` refilled over `window`. The buckets live in this process: with
// several instances behind a load balancer, a client may make up to `requests` per
// window at each. It only refuses, so it never makes one instance accept what
// another consumed or revoked.
type limiter struct {
	every    rate.Limit
	burst    int
	window   time.Duration
	clientIP func(*http.Request) string

	mu       sync.Mutex
	clients  map[string]*client
	overflow *rate.Limiter
	sweepAt  time.Time
}

type client struct {
	bucket   *rate.Limiter
	lastSeen time.Time
}

// RateLimit bounds unauthenticated writes per client address: Requests per Window.
type RateLimit struct {
	Off      bool
	Requests int
	Window   time.Duration
}

func newLimiter(cfg RateLimit, clientIP func(*http.Request) string) *limiter {
	if cfg.Off || cfg.Requests < 1 || cfg.Window <= 0 {
		return nil
	}
	if clientIP == nil {
		clientIP = RemoteIP
	}
	window := cfg.Window
	every := rate.Limit(float64(cfg.Requests) / window.Seconds())
	return &limiter{
		every: every, burst: cfg.Requests, window: window, clientIP: clientIP,
		clients:  map[string]*client{},
		overflow: rate.NewLimiter(every*100, cfg.Requests*100),
	}
}

// bucket returns the client's bucket.
func (l *limiter) bucket(r *http.Request, now time.Time) *rate.Limiter {
	ip := addressKey(l.clientIP(r))
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.After(l.sweepAt) {
		for k, c := range l.clients {
			if now.Sub(c.lastSeen) > l.window {
				delete(l.clients, k) // a full bucket again; nothing is lost
			}
		}
		l.sweepAt = now.Add(l.window)
	}
	c, ok := l.clients[ip]
	if !ok {
		if len(l.clients) >= maxTrackedClients {
			return l.overflow
		}
		c = &client{bucket: rate.NewLimiter(l.every, l.burst)}
		l.clients[ip] = c
	}
	c.lastSeen = now
	return c.bucket
}

// allow takes one request from the client's bucket, or returns the refusal (429
// with Retry-After) for the caller to answer in its dialect.
func (l *limiter) allow(r *http.Request) *fault.Error {
	if l == nil {
		return nil
	}
	now := time.Now()
	b := l.bucket(r, now)
	if b.AllowN(now, 1) {
		return nil
	}
	return l.refusal(b, now)
}

// admits is allow without taking the request (for endpoints that only count
// failures).
func (l *limiter) admits(r *http.Request) *fault.Error {
	if l == nil {
		return nil
	}
	now := time.Now()
	b := l.bucket(r, now)
	if b.TokensAt(now) >= 1 {
		return nil
	}
	return l.refusal(b, now)
}

// charge takes one request from the client's bucket (a failure that counts).
func (l *limiter) charge(r *http.Request) {
	if l != nil {
		l.bucket(r, time.Now()).AllowN(time.Now(), 1)
	}
}

// refusal is the fault of a client out of requests: 429, retry when its bucket
// holds one again.
func (l *limiter) refusal(b *rate.Limiter, now time.Time) *fault.Error {
	wait := (1 - b.TokensAt(now)) / float64(l.every)
	return &fault.Error{Class: fault.TooMany, Code: codeRateLimited,
		Message: "too many requests from this address; retry later", RetryAfter: time.Duration(math.Ceil(max(wait, 1))) * time.Second}
}

// address is the client address that per-address limits count r under, or ""
// when the rate limit is off (every client may share one address: behind a proxy
// that Caddy does not trust, say).
func (l *limiter) address(r *http.Request) string {
	if l == nil {
		return ""
	}
	return addressKey(l.clientIP(r))
}

// RemoteIP is the address of the request's peer, the ClientIP of a server that
// trusts no proxy.
func RemoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// limited wraps a handler of unauthenticated writes with the rate limit.
func (s *Server) limited(h http.HandlerFunc, write errorWriter) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if refused := s.limiter.allow(r); refused != nil {
			write(w, r, refused)
			return
		}
		h(w, r)
	}
}

// errorWriter answers an error in one dialect: writeError (/v1 JSON),
// writeOAuthError (OAuth JSON), writeLogoutError and writeErrorPage (the error
// page), or one of the JSON dialects and the page by negotiation (negotiated).
type errorWriter func(http.ResponseWriter, *http.Request, error)
