package backchannel

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/oidc"
)

// outcomes records a Sender's reports.
type outcomes struct {
	mu   sync.Mutex
	list []string
	errs []string
	done chan struct{}
}

func newOutcomes() *outcomes { return &outcomes{done: make(chan struct{}, 100)} }

func (o *outcomes) report(clientID, outcome string, err error) {
	o.mu.Lock()
	o.list = append(o.list, clientID+":"+outcome)
	if err != nil {
		o.errs = append(o.errs, err.Error())
	}
	o.mu.Unlock()
	o.done <- struct{}{}
}

// wait waits for n reports (a test's deadline bounds it) and returns them all.
func (o *outcomes) wait(t *testing.T, n int) ([]string, []string) {
	t.Helper()
	for range n {
		select {
		case <-o.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("waited 30s for %d reports", n)
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.list...), append([]string(nil), o.errs...)
}

func start(t *testing.T, cfg Config) (*Sender, *outcomes) {
	t.Helper()
	o := newOutcomes()
	cfg.Report = o.report
	s := New(cfg)
	s.Start()
	t.Cleanup(s.Close)
	return s, o
}

const token = "eyJhbGciOiJSUzI1NiJ9.eyJzaWQiOiJ4In0.c2lnbmF0dXJl"

// TestSendPostsTheLogoutToken: a POST of application/x-www-form-urlencoded
// logout_token=… to the URI (its query kept), once; 200 and 204 are sent.
func TestSendPostsTheLogoutToken(t *testing.T) {
	for _, status := range []int{http.StatusOK, http.StatusNoContent} {
		var mu sync.Mutex
		var got []*http.Request
		var forms []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = r.ParseForm()
			mu.Lock()
			got, forms = append(got, r), append(forms, r.PostForm.Get("logout_token"))
			mu.Unlock()
			w.WriteHeader(status)
		}))
		t.Cleanup(srv.Close)
		s, o := start(t, Config{})
		s.Send(oidc.BackchannelLogout{ClientID: "app", URI: srv.URL + "/redirect_uri?logout=backchannel", Token: token})
		list, _ := o.wait(t, 1)
		if len(list) != 1 || list[0] != "app:sent" {
			t.Fatalf("%d: reports %v; want app:sent", status, list)
		}
		mu.Lock()
		r := got[0]
		if len(got) != 1 || r.Method != http.MethodPost || r.URL.Path != "/redirect_uri" || r.URL.Query().Get("logout") != "backchannel" ||
			r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" || forms[0] != token {
			t.Errorf("%d: got %d requests, %s %s, %q, token %q", status, len(got), r.Method, r.URL, r.Header.Get("Content-Type"), forms[0])
		}
		mu.Unlock()
	}
}

// TestSendRetriesOnceThenFails: a 5xx or a network error is tried once more
// after the backoff, then reported failed (the reason without the token); a
// 4xx is not tried again.
func TestSendRetriesOnceThenFails(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		n := hits[r.URL.Path]
		mu.Unlock()
		switch {
		case r.URL.Path == "/flaky" && n == 1:
			w.WriteHeader(http.StatusBadGateway)
		case r.URL.Path == "/flaky":
			w.WriteHeader(http.StatusOK)
		case r.URL.Path == "/down":
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	t.Cleanup(srv.Close)
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close() // a refused connection

	s, o := start(t, Config{Backoff: time.Millisecond})
	s.Send(oidc.BackchannelLogout{ClientID: "flaky", URI: srv.URL + "/flaky", Token: token})
	s.Send(oidc.BackchannelLogout{ClientID: "down", URI: srv.URL + "/down", Token: token})
	s.Send(oidc.BackchannelLogout{ClientID: "bad", URI: srv.URL + "/bad", Token: token})
	s.Send(oidc.BackchannelLogout{ClientID: "refused", URI: closedURL + "/x", Token: token})
	list, errs := o.wait(t, 4)
	want := map[string]bool{"flaky:sent": true, "down:failed": true, "bad:failed": true, "refused:failed": true}
	for _, l := range list {
		if !want[l] {
			t.Errorf("report %s; want %v", l, want)
		}
	}
	mu.Lock()
	if hits["/flaky"] != 2 || hits["/down"] != 2 || hits["/bad"] != 1 {
		t.Errorf("requests %v; want flaky and down twice (one retry), bad once", hits)
	}
	mu.Unlock()
	for _, e := range errs {
		if strings.Contains(e, token) {
			t.Errorf("a reason carries the token: %s", e)
		}
	}
}

// TestSendFollowsNoRedirect: a 3xx is the answer (a failure); its Location is
// not asked.
func TestSendFollowsNoRedirect(t *testing.T) {
	var mu sync.Mutex
	followed := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			mu.Lock()
			followed = true
			mu.Unlock()
			return
		}
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)
	s, o := start(t, Config{})
	s.Send(oidc.BackchannelLogout{ClientID: "app", URI: srv.URL + "/bcl", Token: token})
	if list, _ := o.wait(t, 1); list[0] != "app:failed" {
		t.Errorf("report %v; want app:failed", list)
	}
	mu.Lock()
	defer mu.Unlock()
	if followed {
		t.Error("the redirect was followed")
	}
}

// TestSendTimesOut: a relying party that does not answer within the timeout
// fails (after its retry) instead of holding a worker.
func TestSendTimesOut(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	s, o := start(t, Config{Timeout: 50 * time.Millisecond, Backoff: time.Millisecond})
	s.Send(oidc.BackchannelLogout{ClientID: "slow", URI: srv.URL, Token: token})
	if list, _ := o.wait(t, 1); list[0] != "slow:failed" {
		t.Errorf("report %v; want slow:failed", list)
	}
}

// TestSendDropsWhenTheQueueIsFull: with every worker busy and the queue full, a
// logout is dropped at once (Send never blocks), and reported.
func TestSendDropsWhenTheQueueIsFull(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
	}))
	t.Cleanup(srv.Close)
	s, o := start(t, Config{Workers: 1, QueueLen: 1})
	s.Send(oidc.BackchannelLogout{ClientID: "a", URI: srv.URL, Token: token})
	<-arrived                                                                 // the worker holds a
	s.Send(oidc.BackchannelLogout{ClientID: "b", URI: srv.URL, Token: token}) // queued
	s.Send(oidc.BackchannelLogout{ClientID: "c", URI: srv.URL, Token: token}) // dropped
	if list, _ := o.wait(t, 1); list[0] != "c:dropped" {
		t.Errorf("report %v; want c:dropped", list)
	}
	close(release)
	list, _ := o.wait(t, 2)
	if strings.Join(list, " ") != "c:dropped a:sent b:sent" {
		t.Errorf("reports %v; want c dropped, a and b sent", list)
	}
}

// TestSendRestrictedRefusesPrivateAddresses: a self-registered client's URI on
// a loopback or private address is not dialled (the checked dialer of client
// metadata documents), a name resolving to one neither; with the operator's
// allowance it is; an operator's client may name any host.
func TestSendRestrictedRefusesPrivateAddresses(t *testing.T) {
	var mu sync.Mutex
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	resolver := staticResolver{"rp.example.test": netip.MustParseAddr("127.0.0.1")}

	s, o := start(t, Config{Resolver: resolver, Backoff: time.Millisecond})
	s.Send(oidc.BackchannelLogout{ClientID: "ip", URI: srv.URL, Token: token, Restricted: true})
	s.Send(oidc.BackchannelLogout{ClientID: "name", URI: "http://rp.example.test:" + port + "/bcl", Token: token, Restricted: true})
	list, errs := o.wait(t, 2)
	for _, l := range list {
		if !strings.HasSuffix(l, ":failed") {
			t.Errorf("report %s; want failed", l)
		}
	}
	for _, e := range errs {
		if !strings.Contains(e, "non-public address") {
			t.Errorf("reason %q; want the address refused", e)
		}
	}
	mu.Lock()
	if hits != 0 {
		t.Errorf("the relying party on loopback was reached %d times", hits)
	}
	mu.Unlock()

	s2, o2 := start(t, Config{Resolver: resolver, AllowPrivate: true})
	s2.Send(oidc.BackchannelLogout{ClientID: "allowed", URI: "http://rp.example.test:" + port + "/bcl", Token: token, Restricted: true})
	s2.Send(oidc.BackchannelLogout{ClientID: "operator", URI: srv.URL, Token: token})
	if list, _ := o2.wait(t, 2); len(list) != 2 || !strings.HasSuffix(list[0], ":sent") || !strings.HasSuffix(list[1], ":sent") {
		t.Errorf("reports %v; want both sent", list)
	}
}

type staticResolver map[string]netip.Addr

func (r staticResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if ip, ok := r[host]; ok {
		return []netip.Addr{ip}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// TestCloseStopsTheWorkers: Close cancels a request under way and returns
// (no worker left), drops what is queued, and a Send after it drops.
func TestCloseStopsTheWorkers(t *testing.T) {
	arrived := make(chan struct{}, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // then the server notices the client's close
		arrived <- struct{}{}
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	o := newOutcomes()
	s := New(Config{Workers: 1, Report: o.report})
	s.Start()
	s.Send(oidc.BackchannelLogout{ClientID: "a", URI: srv.URL, Token: token})
	<-arrived
	s.Send(oidc.BackchannelLogout{ClientID: "b", URI: srv.URL, Token: token})
	s.Close() // returns: the request under way is cancelled
	s.Send(oidc.BackchannelLogout{ClientID: "c", URI: srv.URL, Token: token})
	list, _ := o.wait(t, 3)
	if strings.Join(list, " ") != "a:failed b:dropped c:dropped" {
		t.Errorf("reports %v; want a failed (cancelled), b and c dropped", list)
	}
	s.Close() // again: nothing
}

// TestSendRacingCloseIsCounted: a logout sent while the sender closes is either
// queued before Close drains the queue or dropped at once; none is left in the
// queue unreported (the metric and the audit would miss it).
func TestSendRacingCloseIsCounted(t *testing.T) {
	for range 200 {
		var reports atomic.Int32
		s := New(Config{QueueLen: 1000, Report: func(string, string, error) { reports.Add(1) }})
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for range 25 {
					s.Send(oidc.BackchannelLogout{ClientID: "c", URI: "https://rp.example/bcl", Token: token, Restricted: g%2 == 0})
				}
			})
		}
		s.Close()
		wg.Wait()
		if n := reports.Load(); n != 100 {
			t.Fatalf("100 logouts sent around Close, %d reported (%d and %d left queued)", n, len(s.operator.queue), len(s.restricted.queue))
		}
	}
}
