// Package backchannel delivers the logout tokens of OpenID Connect Back-Channel
// Logout 1.0 (core/oidc/backchannel.go) to the clients' backchannel_logout_uri:
// a POST of logout_token=… (application/x-www-form-urlencoded, BCL 2.5), from a
// bounded in-memory queue and a few workers, each request within a time limit,
// a client's logouts one at a time (so that a slow relying party holds one
// worker, not all), the operator's clients' on workers of their own (so that no
// self-registered client delays or drops theirs),
// no redirect followed, 200 or 204 a success, one retry after a short backoff on
// a network error or a 5xx answer, then given up.
//
// The URI is a client's choice, so the sender is an SSRF surface: a
// self-registered or metadata-document client's URI (BackchannelLogout.Restricted)
// is dialled through edge/clientmeta's checked dialer, which refuses private,
// loopback and other non-public addresses unless the operator allowed private
// ones for metadata documents, and connects to the address it checked. An
// operator's client may name any host (an intranet application is normal).
//
// Nothing it logs or reports carries the token.
package backchannel

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/edge/clientmeta"
)

// Defaults of the Config fields left zero.
const (
	DefaultWorkers  = 4
	DefaultQueueLen = 1024
	DefaultTimeout  = 5 * time.Second
	DefaultBackoff  = time.Second
	// maxAnswerBytes is as much of an answer's body as is read (and discarded),
	// so that the connection may be reused; the rest is not read.
	maxAnswerBytes = 4 << 10
)

// Outcomes reported (the metric's label values).
const (
	Sent    = "sent"
	Failed  = "failed"
	Dropped = "dropped"
)

// Config builds a Sender; zero fields take the defaults above.
type Config struct {
	// Workers is the number of workers of each of the two queues (the
	// operator's clients', the others'); QueueLen the length of each.
	Workers  int
	QueueLen int
	// Timeout bounds each request (connection, TLS, answer's header and body).
	Timeout time.Duration
	// Backoff is the wait before the one retry.
	Backoff time.Duration
	// AllowPrivate lets a restricted URI reach private and loopback addresses
	// (the operator's allow_private of client metadata documents).
	AllowPrivate bool
	// Resolver resolves the host of a restricted URI; nil: net.DefaultResolver.
	Resolver clientmeta.Resolver
	// TLS is the TLS configuration (its RootCAs); nil: the system's roots.
	TLS *tls.Config
	// Report is told each logout's outcome (Sent, Failed, Dropped) and, for a
	// failure or a drop, why (never the token); nil: nothing.
	Report func(clientID, outcome string, reason error)
}

// Sender queues logout tokens and delivers them (oidc.LogoutSender). Start
// starts its workers; Close stops them, cancelling the requests under way and
// dropping what is queued. Send after Close drops.
type Sender struct {
	cfg Config
	// operator delivers the operator's clients' logouts (any host), restricted
	// the others' (public addresses only: clientmeta.DialChecked): each its own
	// queue and workers.
	operator, restricted *lane

	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
	wg     sync.WaitGroup
	closed sync.Once
	// sending is held (read) by Send from its check of ctx to its enqueue, and
	// taken by Close to cancel ctx before it drains: a logout is queued before the
	// drain or dropped at once, never left in a queue no one reads.
	sending sync.RWMutex
}

var _ oidc.LogoutSender = (*Sender)(nil)

// New builds a Sender; it starts nothing (Start does).
func New(cfg Config) *Sender {
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = DefaultQueueLen
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	s := &Sender{cfg: cfg}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	var d net.Dialer
	s.operator = s.newLane(s.client(d.DialContext))
	s.restricted = s.newLane(s.client(func(ctx context.Context, network, addr string) (net.Conn, error) {
		return clientmeta.DialChecked(ctx, cfg.Resolver, cfg.AllowPrivate, network, addr)
	}))
	return s
}

// lane is a queue, its workers' HTTP client, and the clients being delivered
// to: a worker that takes a logout of a client another worker is sending to
// leaves it behind that one (busy), which sends it next, so that one client's
// logouts go one at a time and a relying party that answers slowly holds one
// worker only. busy has at most Workers entries, each at most QueueLen long.
type lane struct {
	queue  chan oidc.BackchannelLogout
	client *http.Client
	mu     sync.Mutex
	busy   map[string][]oidc.BackchannelLogout
}

func (s *Sender) newLane(c *http.Client) *lane {
	return &lane{queue: make(chan oidc.BackchannelLogout, s.cfg.QueueLen), client: c,
		busy: map[string][]oidc.BackchannelLogout{}}
}

// claim makes l's client this worker's, or leaves l behind the worker that has
// it (false); a backlog as long as the queue drops l (false).
func (s *Sender) claim(ln *lane, l oidc.BackchannelLogout) bool {
	ln.mu.Lock()
	backlog, taken := ln.busy[l.ClientID]
	switch {
	case !taken:
		ln.busy[l.ClientID] = nil
		ln.mu.Unlock()
		return true
	case len(backlog) < s.cfg.QueueLen:
		ln.busy[l.ClientID] = append(backlog, l)
		ln.mu.Unlock()
		return false
	}
	ln.mu.Unlock()
	s.report(l.ClientID, Dropped, fmt.Errorf("the client's back-channel logouts waiting are too many (%d)", s.cfg.QueueLen))
	return false
}

// next is the logout of client id left behind this worker, or, with none, it
// releases the client (false).
func (ln *lane) next(id string) (oidc.BackchannelLogout, bool) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	backlog := ln.busy[id]
	if len(backlog) == 0 {
		delete(ln.busy, id)
		return oidc.BackchannelLogout{}, false
	}
	l := backlog[0]
	ln.busy[id] = backlog[1:]
	return l, true
}

func (s *Sender) client(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Client {
	return &http.Client{Transport: clientmeta.NewTransport(dial, s.cfg.TLS, s.cfg.Timeout, s.cfg.Workers), Timeout: s.cfg.Timeout,
		// BCL 2.5 names no redirect: a 3xx is the answer, a failure.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Start starts the workers (once).
func (s *Sender) Start() {
	s.once.Do(func() {
		for range s.cfg.Workers {
			s.wg.Go(func() { s.work(s.operator) })
			s.wg.Go(func() { s.work(s.restricted) })
		}
	})
}

// Close stops the workers and waits for them: the requests under way are
// cancelled, the logouts still queued dropped. It may be called more than once.
func (s *Sender) Close() {
	s.closed.Do(func() {
		s.once.Do(func() {}) // no Start after Close
		s.sending.Lock()
		s.cancel()
		s.sending.Unlock()
		s.wg.Wait()
		for _, ln := range []*lane{s.operator, s.restricted} {
			for drained := false; !drained; {
				select {
				case l := <-ln.queue:
					s.report(l.ClientID, Dropped, errStopped)
				default:
					drained = true
				}
			}
			ln.client.CloseIdleConnections()
		}
	})
}

var errStopped = errors.New("palmgate stopped (a config reload) before it was sent")

// Send queues l; with the queue full, or the sender closed, it drops l.
func (s *Sender) Send(l oidc.BackchannelLogout) {
	s.sending.RLock()
	defer s.sending.RUnlock()
	if s.ctx.Err() != nil {
		s.report(l.ClientID, Dropped, errors.New("palmgate is stopping"))
		return
	}
	ln := s.operator
	if l.Restricted {
		ln = s.restricted
	}
	select {
	case ln.queue <- l:
	default:
		s.report(l.ClientID, Dropped, fmt.Errorf("the back-channel logout queue is full (%d)", s.cfg.QueueLen))
	}
}

func (s *Sender) work(ln *lane) {
	for {
		select {
		case <-s.ctx.Done():
			return
		case l := <-ln.queue:
			if s.ctx.Err() != nil { // both were ready: Close won
				s.report(l.ClientID, Dropped, errStopped)
				return
			}
			if !s.claim(ln, l) {
				continue // behind the worker sending to its client
			}
			for more := true; more; l, more = ln.next(l.ClientID) {
				if s.ctx.Err() != nil {
					s.report(l.ClientID, Dropped, errStopped)
					continue
				}
				s.deliver(ln.client, l)
			}
		}
	}
}

// deliver POSTs l, once more after the backoff on a network error or a 5xx.
func (s *Sender) deliver(c *http.Client, l oidc.BackchannelLogout) {
	if l.Prepare != nil { // signed now (a metadata-document client's document read first)
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.Timeout)
		uri, token, err := l.Prepare(ctx)
		cancel()
		switch {
		case err != nil:
			s.report(l.ClientID, Failed, fmt.Errorf("preparing the logout token: %w", redact(err, token)))
			return
		case uri == "":
			return // no backchannel_logout_uri: nothing to send
		}
		l.URI, l.Token, l.Prepare = uri, token, nil
	}
	retry, err := s.post(c, l)
	if err != nil && retry {
		t := time.NewTimer(s.cfg.Backoff)
		select {
		case <-s.ctx.Done():
			t.Stop()
		case <-t.C:
			_, err = s.post(c, l)
		}
	}
	if err != nil {
		s.report(l.ClientID, Failed, err)
		return
	}
	s.report(l.ClientID, Sent, nil)
}

// post sends l once; retry says whether a failure may be tried again.
func (s *Sender) post(c *http.Client, l oidc.BackchannelLogout) (retry bool, err error) {
	if err := s.ctx.Err(); err != nil {
		return false, errors.New("palmgate stopped before it was sent")
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.Timeout)
	defer cancel()
	body := url.Values{"logout_token": {l.Token}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.URI, strings.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("backchannel_logout_uri: %w", redact(err, l.Token))
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Cache-Control", "no-store")
	resp, err := c.Do(req)
	if err != nil {
		return true, fmt.Errorf("POST %s: %w", hostOf(l.URI), redact(unwrapURL(err), l.Token))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswerBytes))
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusNoContent:
		return false, nil
	case resp.StatusCode >= 500:
		return true, fmt.Errorf("POST %s: answered %d", hostOf(l.URI), resp.StatusCode)
	default:
		return false, fmt.Errorf("POST %s: answered %d", hostOf(l.URI), resp.StatusCode)
	}
}

func (s *Sender) report(clientID, outcome string, err error) {
	if s.cfg.Report != nil {
		s.cfg.Report(clientID, outcome, err)
	}
}

// unwrapURL drops the *url.Error around a request's error: it repeats the URL.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// redact removes the token from an error's text, should one ever carry it.
func redact(err error, token string) error {
	if token != "" && strings.Contains(err.Error(), token) {
		return errors.New(strings.ReplaceAll(err.Error(), token, "[logout token]"))
	}
	return err
}

// hostOf is the scheme and host of uri, for messages.
func hostOf(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return "the backchannel_logout_uri"
	}
	return u.Scheme + "://" + u.Host
}
