// Package backchannel delivers the logout tokens of OpenID Connect Back-Channel
// Logout 1.0 (core/oidc/backchannel.go) to the clients' backchannel_logout_uri:
// a POST of logout_token=… (application/x-www-form-urlencoded, BCL 2.5), from a
// bounded in-memory queue and a few workers, each request within a time limit,
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
	// maxHeaderBytes bounds an answer's header.
	maxHeaderBytes = 16 << 10
)

// Outcomes reported (the metric's label values).
const (
	Sent    = "sent"
	Failed  = "failed"
	Dropped = "dropped"
)

// Config builds a Sender; zero fields take the defaults above.
type Config struct {
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
	cfg        Config
	queue      chan oidc.BackchannelLogout
	operator   *http.Client // any host
	restricted *http.Client // public addresses only (clientmeta.DialChecked)

	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
	wg     sync.WaitGroup
	closed sync.Once
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
	s := &Sender{cfg: cfg, queue: make(chan oidc.BackchannelLogout, cfg.QueueLen)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	var d net.Dialer
	s.operator = s.client(d.DialContext)
	s.restricted = s.client(func(ctx context.Context, network, addr string) (net.Conn, error) {
		return clientmeta.DialChecked(ctx, cfg.Resolver, cfg.AllowPrivate, network, addr)
	})
	return s
}

func (s *Sender) client(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Client {
	tr := &http.Transport{
		Proxy:                  nil, // the URI's host, not an environment's proxy, is what was checked
		DialContext:            dial,
		TLSClientConfig:        s.cfg.TLS,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    s.cfg.Timeout,
		ResponseHeaderTimeout:  s.cfg.Timeout,
		MaxResponseHeaderBytes: maxHeaderBytes,
		MaxIdleConns:           s.cfg.Workers,
		IdleConnTimeout:        30 * time.Second,
	}
	return &http.Client{Transport: tr, Timeout: s.cfg.Timeout,
		// BCL 2.5 names no redirect: a 3xx is the answer, a failure.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Start starts the workers (once).
func (s *Sender) Start() {
	s.once.Do(func() {
		for range s.cfg.Workers {
			s.wg.Go(s.work)
		}
	})
}

// Close stops the workers and waits for them: the requests under way are
// cancelled, the logouts still queued dropped. It may be called more than once.
func (s *Sender) Close() {
	s.closed.Do(func() {
		s.once.Do(func() {}) // no Start after Close
		s.cancel()
		s.wg.Wait()
		for {
			select {
			case l := <-s.queue:
				s.report(l.ClientID, Dropped, errors.New("palmgate stopped (a config reload) before it was sent"))
			default:
				s.operator.CloseIdleConnections()
				s.restricted.CloseIdleConnections()
				return
			}
		}
	})
}

// Send queues l; with the queue full, or the sender closed, it drops l.
func (s *Sender) Send(l oidc.BackchannelLogout) {
	if s.ctx.Err() != nil {
		s.report(l.ClientID, Dropped, errors.New("palmgate is stopping"))
		return
	}
	select {
	case s.queue <- l:
	default:
		s.report(l.ClientID, Dropped, fmt.Errorf("the back-channel logout queue is full (%d)", s.cfg.QueueLen))
	}
}

func (s *Sender) work() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case l := <-s.queue:
			if s.ctx.Err() != nil { // both were ready: Close won
				s.report(l.ClientID, Dropped, errors.New("palmgate stopped (a config reload) before it was sent"))
				return
			}
			s.deliver(l)
		}
	}
}

// deliver POSTs l, once more after the backoff on a network error or a 5xx.
func (s *Sender) deliver(l oidc.BackchannelLogout) {
	retry, err := s.post(l)
	if err != nil && retry {
		t := time.NewTimer(s.cfg.Backoff)
		select {
		case <-s.ctx.Done():
			t.Stop()
		case <-t.C:
			_, err = s.post(l)
		}
	}
	if err != nil {
		s.report(l.ClientID, Failed, err)
		return
	}
	s.report(l.ClientID, Sent, nil)
}

// post sends l once; retry says whether a failure may be tried again.
func (s *Sender) post(l oidc.BackchannelLogout) (retry bool, err error) {
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
	c := s.operator
	if l.Restricted {
		c = s.restricted
	}
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
