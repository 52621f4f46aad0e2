package clientmeta

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/clocktest"
)

// docServer is an https server of documents at its paths, with the fetcher that
// trusts its certificate.
func docServer(t *testing.T, h http.HandlerFunc, cfg Config) (*httptest.Server, *Fetcher) {
	t.Helper()
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	cfg.TLS = &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	return srv, New(cfg)
}

func jsonDoc(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(body))
}

func TestFetchAndCache(t *testing.T) {
	clock := clocktest.New(time.Now())
	var hits atomic.Int32
	srv, f := docServer(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/long":
			w.Header().Set("Cache-Control", "public, max-age=999999")
		case "/nostore":
			w.Header().Set("Cache-Control", "no-store")
		case "/hour":
			w.Header().Set("Cache-Control", "max-age=3600")
		}
		jsonDoc(w, `{"client_id":"x"}`)
	}, Config{AllowPrivate: true, Now: clock.Now})
	ctx := context.Background()
	for _, tc := range []struct {
		path string
		ttl  time.Duration
	}{{"/long", DefaultMaxTTL}, {"/nostore", DefaultMinTTL}, {"/hour", time.Hour}, {"/none", DefaultTTL}} {
		t.Run(tc.path, func(t *testing.T) {
			hits.Store(0)
			for range 2 {
				if b, err := f.Fetch(ctx, srv.URL+tc.path); err != nil || string(b) != `{"client_id":"x"}` {
					t.Fatalf("Fetch = %q, %v", b, err)
				}
			}
			if hits.Load() != 1 {
				t.Fatalf("%d fetches; want 1 (the second from the cache)", hits.Load())
			}
			clock.Advance(tc.ttl - time.Second)
			_, _ = f.Fetch(ctx, srv.URL+tc.path)
			if hits.Load() != 1 {
				t.Fatalf("fetched again before its lifetime of %v ended", tc.ttl)
			}
			clock.Advance(2 * time.Second)
			_, _ = f.Fetch(ctx, srv.URL+tc.path)
			if hits.Load() != 2 {
				t.Fatalf("not fetched again after its lifetime of %v", tc.ttl)
			}
		})
	}
}

// TestFetchRefusals: what the fetcher refuses, each with a reason.
func TestFetchRefusals(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	handler := func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			jsonDoc(w, `{"client_id":"`+strings.Repeat("x", DefaultMaxBytes)+`"}`)
		case "/big-chunked":
			w.Header().Set("Content-Type", "application/json")
			for range 10 {
				_, _ = w.Write([]byte(strings.Repeat(" ", 1024)))
				w.(http.Flusher).Flush()
			}
		case "/slow":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case "/elsewhere":
			http.Redirect(w, r, "https://other.example.test/doc", http.StatusFound)
		case "/same":
			http.Redirect(w, r, "/doc", http.StatusFound)
		case "/doc":
			jsonDoc(w, `{}`)
		case "/html":
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html>"))
		default:
			http.NotFound(w, r)
		}
	}
	srv, f := docServer(t, handler, Config{AllowPrivate: true, Timeout: 300 * time.Millisecond})
	_, strict := docServer(t, handler, Config{})
	ctx := context.Background()
	if _, err := f.Fetch(ctx, srv.URL+"/same"); err != nil {
		t.Fatalf("a redirect on the same host: %v", err)
	}
	for _, tc := range []struct {
		name, url, why string
		f              *Fetcher
	}{
		{"too large", srv.URL + "/big", "larger than 5120 bytes", f},
		{"too large, chunked", srv.URL + "/big-chunked", "larger than 5120 bytes", f},
		{"too slow", srv.URL + "/slow", "longer than 300ms", f},
		{"a redirect to another host", srv.URL + "/elsewhere", "another host", f},
		{"not found", srv.URL + "/missing", "answered 404", f},
		{"not JSON", srv.URL + "/html", "text/html", f},
		{"not https", strings.Replace(srv.URL, "https:", "http:", 1) + "/doc", "not an https URL", f},
		{"a loopback address without the allowance", srv.URL + "/doc", "non-public address", strict},
		{"localhost without the allowance", strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) + "/doc", "non-public address", strict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := tc.f.Fetch(ctx, tc.url)
			if err == nil || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("Fetch = %v; want an error saying %q", err, tc.why)
			}
			if time.Since(start) > 5*time.Second {
				t.Fatalf("the refusal took %v", time.Since(start))
			}
		})
	}
}

// TestBlockedLocalNAT64 (review 3, finding 2): the local-use NAT64 prefix
// 64:ff9b:1::/48 (RFC 8215; IANA's special-purpose registry: not globally
// reachable) maps to IPv4 addresses through the network's own translator, so a
// document URL there reached 10.0.0.1 or 169.254.169.254 where such a translator
// runs; only the well-known 64:ff9b::/96 was checked.
func TestBlockedLocalNAT64(t *testing.T) {
	for _, s := range []string{"64:ff9b:1::a00:1", "64:ff9b:1:a9fe:a9:fe00::", "64:ff9b:1:ffff::1"} {
		if !Blocked(netip.MustParseAddr(s)) {
			t.Errorf("Blocked(%s) = false", s)
		}
	}
}

func TestBlocked(t *testing.T) {
	for _, s := range []string{"127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0",
		"224.0.0.1", "255.255.255.255", "::1", "::", "fe80::1", "fd00::1", "ff02::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1",
		"64:ff9b::a9fe:a9fe", "2002:7f00:1::1", "fe80::1%eth0"} {
		if !Blocked(netip.MustParseAddr(s)) {
			t.Errorf("Blocked(%s) = false", s)
		}
	}
	for _, s := range []string{"8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"} {
		if Blocked(netip.MustParseAddr(s)) {
			t.Errorf("Blocked(%s) = true", s)
		}
	}
}

// fakeResolver answers every name with addrs.
type fakeResolver []netip.Addr

func (f fakeResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return f, nil
}

// TestFetchDialsTheCheckedAddress: the name is resolved once, by the fetcher,
// and the connection goes to the address it checked (here the test server, on
// loopback, which the name example.com resolves to); TLS still verifies the
// name. Without the allowance the same answer is refused before any connection.
func TestFetchDialsTheCheckedAddress(t *testing.T) {
	var hits atomic.Int32
	handler := func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if !strings.HasPrefix(r.Host, "example.com:") {
			t.Errorf("Host %q: want the URL's name", r.Host)
		}
		jsonDoc(w, `{}`)
	}
	resolver := fakeResolver{netip.MustParseAddr("127.0.0.1")}
	srv, allowed := docServer(t, handler, Config{AllowPrivate: true, Resolver: resolver})
	_, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "https://"), ":")
	named := "https://example.com:" + port + "/doc" // in the test certificate's names
	if _, err := allowed.Fetch(context.Background(), named); err != nil {
		t.Fatalf("Fetch through the resolved address: %v", err)
	}
	_, strict := docServer(t, handler, Config{Resolver: resolver})
	if _, err := strict.Fetch(context.Background(), named); err == nil || !strings.Contains(err.Error(), "127.0.0.1, a private, loopback") {
		t.Fatalf("a name resolving to loopback without the allowance: %v", err)
	}
	// A name that resolves to a public and a private address: the private one is
	// never dialled (here the public one is unreachable, a documentation address
	// being refused too, so the fetch fails without touching the server).
	hits.Store(0)
	_, mixed := docServer(t, handler, Config{Resolver: fakeResolver{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("127.0.0.1")}})
	if _, err := mixed.Fetch(context.Background(), named); err == nil || hits.Load() != 0 {
		t.Fatalf("a name with a private address reached the server (%d hits): %v", hits.Load(), err)
	}
}
