// Package clientmeta fetches client ID metadata documents
// (draft-ietf-oauth-client-id-metadata-document) for core/oidc, which validates
// them. A client_id chosen by anyone makes palmgate send a request to a URL of
// their choice, so the fetch is an SSRF surface; the defences:
//
//   - https only, on port 443 or any port the URL names; no proxy from the
//     environment;
//   - the host is resolved here and every address checked (Blocked: private,
//     loopback, link-local, unspecified, multicast, CGNAT, IPv4-mapped and NAT64
//     forms of those, the local-use NAT64 prefix, ...), and the connection goes
//     to the checked address itself, never to a second resolution (no DNS
//     rebinding between check and connect); AllowPrivate lifts this for
//     operators (and tests) whose clients live on a private network;
//   - redirects only to the same scheme and host (at most 3);
//   - a time limit (Timeout, 5 s) on the whole fetch and a size limit (MaxBytes,
//     5 KiB) on the body, 16 KiB on the header; only 200 with a JSON media type
//     is a document;
//   - the cache: a document is kept for its Cache-Control max-age (or Expires),
//     bounded by MinTTL (1 minute: no-store, no-cache and max-age=0 included, so a
//     client cannot make every login a fetch) and MaxTTL (24 hours); a failure is
//     kept for FailureTTL (10 s) so a failing URL is not fetched on every request;
//     at most MaxEntries entries (the oldest go first); callers that miss it
//     together share one fetch.
package clientmeta

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// Defaults of Config.
const (
	DefaultMaxBytes   = 5 << 10
	DefaultTimeout    = 5 * time.Second
	DefaultMinTTL     = time.Minute
	DefaultMaxTTL     = 24 * time.Hour
	DefaultTTL        = 5 * time.Minute
	DefaultFailureTTL = 10 * time.Second
	DefaultMaxEntries = 10000
	maxRedirects      = 3
	// maxHeaderBytes bounds an answer's header (net/http's default is 10 MiB).
	maxHeaderBytes = 16 << 10
)

// Config builds a Fetcher; zero fields take the defaults above.
type Config struct {
	// AllowPrivate lets documents live on private, loopback and link-local
	// addresses (the operator's allowance).
	AllowPrivate bool
	MaxBytes     int64
	Timeout      time.Duration
	// MinTTL and MaxTTL bound the cache lifetime of a document; DefaultTTL is
	// it when the response says nothing.
	MinTTL, MaxTTL, DefaultTTL, FailureTTL time.Duration
	MaxEntries                             int
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// Resolver resolves hosts; nil: net.DefaultResolver.
	Resolver Resolver
	// TLS is the TLS configuration (its RootCAs); nil: the system's roots (which
	// SSL_CERT_FILE and SSL_CERT_DIR replace, as for every Go program).
	TLS *tls.Config
}

// Resolver resolves a host name to its addresses (net.Resolver does).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Fetcher fetches and caches documents; safe for concurrent use.
type Fetcher struct {
	cfg    Config
	client *http.Client

	mu    sync.Mutex
	cache map[string]*entry
	// fetching shares one fetch of a URL among the callers that miss the cache
	// while it runs.
	fetching singleflight.Group
}

type entry struct {
	body    []byte
	err     error
	expires time.Time
	added   time.Time
}

// New builds a Fetcher.
func New(cfg Config) *Fetcher {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.Timeout, DefaultTimeout)
	def(&cfg.MinTTL, DefaultMinTTL)
	def(&cfg.MaxTTL, DefaultMaxTTL)
	def(&cfg.DefaultTTL, DefaultTTL)
	def(&cfg.FailureTTL, DefaultFailureTTL)
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultMaxEntries
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	f := &Fetcher{cfg: cfg, cache: map[string]*entry{}}
	f.client = &http.Client{Transport: NewTransport(f.dial, cfg.TLS, cfg.Timeout, 10), Timeout: cfg.Timeout, CheckRedirect: checkRedirect}
	return f
}

// NewTransport is the transport of requests to a URL a client named (the
// metadata documents here, the back-channel logouts of edge/backchannel):
// connections made by dial, no proxy from the environment (the host checked is
// the host dialled), the TLS handshake and the answer's header each within
// timeout, the header bounded, at most maxIdle idle connections.
func NewTransport(dial func(ctx context.Context, network, addr string) (net.Conn, error), tlsConfig *tls.Config, timeout time.Duration, maxIdle int) *http.Transport {
	return &http.Transport{
		Proxy:                  nil,
		TLSClientConfig:        tlsConfig,
		DialContext:            dial,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    timeout,
		ResponseHeaderTimeout:  timeout,
		MaxResponseHeaderBytes: maxHeaderBytes,
		MaxIdleConns:           maxIdle,
		IdleConnTimeout:        30 * time.Second,
	}
}

// checkRedirect follows a redirect only to the same scheme and host.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects {
		return fmt.Errorf("more than %d redirects", maxRedirects)
	}
	if req.URL.Scheme != "https" || !strings.EqualFold(req.URL.Host, via[0].URL.Host) {
		return errors.New("it redirects to another host; a client ID metadata document must be served at its URL")
	}
	return nil
}

// dial resolves the host, checks each address and connects to the first one
// allowed; the connection goes to that checked address, not to a new lookup.
func (f *Fetcher) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return DialChecked(ctx, f.cfg.Resolver, f.cfg.AllowPrivate, network, addr)
}

// DialChecked resolves addr's host with resolver, checks each address (Blocked,
// unless allowPrivate) and connects to the first one allowed: the connection
// goes to that checked address, not to a new lookup. The back-channel logout
// sender dials a self-registered client's URI with it.
func DialChecked(ctx context.Context, resolver Resolver, allowPrivate bool, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else {
		ips, err := resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("resolving %s: %w", host, err)
		}
		addrs = ips
	}
	var d net.Dialer
	var lastErr error
	for _, ip := range addrs {
		if !allowPrivate && Blocked(ip) {
			lastErr = fmt.Errorf("%s resolves to %s, a private, loopback or otherwise non-public address", host, ip.Unmap())
			continue
		}
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		lastErr = err
	}
	if lastErr == nil {
		lastErr = fmt.Errorf("%s has no address", host)
	}
	return nil, lastErr
}

// blockedPrefixes are the non-public address ranges (IANA special-purpose
// registries) a document may not be fetched from without the operator's
// allowance.
var blockedPrefixes = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
		"192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
		"224.0.0.0/4", "240.0.0.0/4",
		"::/128", "::1/128", "100::/64", "2001:db8::/32", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
		"64:ff9b:1::/48", // local-use NAT64 (RFC 8215): the network's own translator, to any IPv4 address
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// Blocked reports whether ip is not a public unicast address: private,
// loopback, link-local, unspecified, multicast, CGNAT, documentation, reserved,
// or the IPv4-mapped, NAT64 (64:ff9b::/96) or 6to4 (2002::/16) form of one.
func Blocked(ip netip.Addr) bool {
	ip = ip.Unmap()
	if ip.Is6() {
		b := ip.As16()
		switch {
		case netip.MustParsePrefix("64:ff9b::/96").Contains(ip):
			return Blocked(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
		case netip.MustParsePrefix("2002::/16").Contains(ip):
			return Blocked(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
		}
	}
	if !ip.IsValid() || ip.Zone() != "" {
		return true
	}
	for _, p := range blockedPrefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Fetch returns the document at rawURL, from the cache while it is fresh. Callers
// that miss the cache together share one fetch. The fetch does not depend on the
// caller that started it: one that gives up gets its context's error, and the
// fetch goes on (within Timeout) for the others and for the cache, so that
// dropping requests does not make each one a new fetch.
func (f *Fetcher) Fetch(ctx context.Context, rawURL string) ([]byte, error) {
	now := f.cfg.Now()
	if e := f.cached(rawURL, now); e != nil {
		return e.body, e.err
	}
	ch := f.fetching.DoChan(rawURL, func() (any, error) {
		if e := f.cached(rawURL, now); e != nil { // by a fetch that ended since the look above
			return e.body, e.err
		}
		body, ttl, err := f.fetch(context.WithoutCancel(ctx), rawURL)
		if err != nil {
			ttl = f.cfg.FailureTTL
		}
		done := f.cfg.Now()
		f.mu.Lock()
		f.putLocked(rawURL, &entry{body: body, err: err, added: done, expires: done.Add(ttl)})
		f.mu.Unlock()
		return body, err
	})
	select {
	case r := <-ch:
		body, _ := r.Val.([]byte)
		return body, r.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// cached is the entry of rawURL still fresh at now, or nil.
func (f *Fetcher) cached(rawURL string, now time.Time) *entry {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.cache[rawURL]; e != nil && now.Before(e.expires) {
		return e
	}
	return nil
}

// putLocked caches e under key; f.mu is held.
func (f *Fetcher) putLocked(key string, e *entry) {
	if len(f.cache) >= f.cfg.MaxEntries {
		now := f.cfg.Now()
		var oldest string
		for k, v := range f.cache {
			if !now.Before(v.expires) {
				delete(f.cache, k)
				continue
			}
			if oldest == "" || v.added.Before(f.cache[oldest].added) {
				oldest = k
			}
		}
		if len(f.cache) >= f.cfg.MaxEntries {
			delete(f.cache, oldest)
		}
	}
	f.cache[key] = e
}

func (f *Fetcher) fetch(ctx context.Context, rawURL string) ([]byte, time.Duration, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, 0, errors.New("it is not an https URL")
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, 0, errors.New("it is not an https URL")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "Client.Timeout") {
			return nil, 0, fmt.Errorf("fetching it took longer than %s", f.cfg.Timeout)
		}
		return nil, 0, fmt.Errorf("fetching it failed: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("fetching it answered %d, not 200", resp.StatusCode)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		return nil, 0, fmt.Errorf("it is served as %.60q, not application/json", mt)
	}
	if resp.ContentLength > f.cfg.MaxBytes {
		return nil, 0, fmt.Errorf("it is larger than %d bytes", f.cfg.MaxBytes)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.cfg.MaxBytes+1))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "Client.Timeout") {
			return nil, 0, fmt.Errorf("fetching it took longer than %s", f.cfg.Timeout)
		}
		return nil, 0, fmt.Errorf("reading it failed: %v", err)
	}
	if int64(len(body)) > f.cfg.MaxBytes {
		return nil, 0, fmt.Errorf("it is larger than %d bytes", f.cfg.MaxBytes)
	}
	return body, f.lifetime(resp.Header), nil
}

// lifetime is how long a response may be cached: its max-age (s-maxage is for
// shared caches, and this one is private to palmgate's clients: max-age rules),
// else its Expires, else DefaultTTL; within MinTTL and MaxTTL.
func (f *Fetcher) lifetime(h http.Header) time.Duration {
	ttl := f.cfg.DefaultTTL
	cc := strings.ToLower(h.Get("Cache-Control"))
	found := false
	for _, d := range strings.Split(cc, ",") {
		d = strings.TrimSpace(d)
		switch {
		case d == "no-store" || d == "no-cache":
			ttl, found = 0, true
		case strings.HasPrefix(d, "max-age="):
			if n, err := strconv.ParseInt(strings.Trim(d[len("max-age="):], `"`), 10, 64); err == nil && n >= 0 && !found {
				ttl = time.Duration(min(n, int64(f.cfg.MaxTTL/time.Second))) * time.Second
				found = true
			}
		}
	}
	if !found {
		if exp, err := http.ParseTime(h.Get("Expires")); err == nil {
			date, err := http.ParseTime(h.Get("Date"))
			if err != nil {
				date = f.cfg.Now()
			}
			ttl = exp.Sub(date)
		}
	}
	return min(max(ttl, f.cfg.MinTTL), f.cfg.MaxTTL)
}
