package backchannel

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/oidc"
)

// TestSlowClientDoesNotStarveOthers (2026-11-27): a relying party that
// answers slowly (or never within the timeout) holds one worker at most, and a
// self-registered client's never one of those that deliver the operator's
// clients' logouts: while a hostile self-registered client's logouts are under
// way, an operator's client and another self-registered client are still told.
func TestSlowClientDoesNotStarveOthers(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(func() { close(release); slow.Close(); fast.Close() })
	s, o := start(t, Config{Workers: 4, AllowPrivate: true, Timeout: time.Minute})
	for range 8 {
		s.Send(oidc.BackchannelLogout{ClientID: "hostile", URI: slow.URL, Token: token, Restricted: true})
	}
	s.Send(oidc.BackchannelLogout{ClientID: "operator", URI: fast.URL, Token: token})
	s.Send(oidc.BackchannelLogout{ClientID: "developer", URI: fast.URL, Token: token, Restricted: true})
	deadline := time.After(15 * time.Second)
	for range 2 {
		select {
		case <-o.done:
		case <-deadline:
			t.Fatal("the operator's and another client's logouts waited behind a slow relying party's")
		}
	}
	o.mu.Lock()
	list := slices.Clone(o.list)
	o.mu.Unlock()
	slices.Sort(list)
	if !slices.Equal(list, []string{"developer:sent", "operator:sent"}) {
		t.Errorf("reports %v; want the operator's and the developer's client sent", list)
	}
}

// TestSendPrepares: a logout with Prepare (a metadata-document client's) is
// prepared by a worker: posted to the URI it gives, failed when it fails, and
// neither sent nor reported when it gives no URI (the client has none).
func TestSendPrepares(t *testing.T) {
	got := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		got <- r.PostForm.Get("logout_token")
	}))
	t.Cleanup(srv.Close)
	s, o := start(t, Config{AllowPrivate: true, Workers: 1})
	prep := func(uri, tok string, err error) func(context.Context) (string, string, error) {
		return func(context.Context) (string, string, error) { return uri, tok, err }
	}
	s.Send(oidc.BackchannelLogout{ClientID: "none", Restricted: true, Prepare: prep("", "", nil)})
	s.Send(oidc.BackchannelLogout{ClientID: "broken", Restricted: true, Prepare: prep("", "", errors.New("its document is gone"))})
	s.Send(oidc.BackchannelLogout{ClientID: "doc", Restricted: true, Prepare: prep(srv.URL, token, nil)})
	list, errs := o.wait(t, 2)
	if !slices.Equal(list, []string{"broken:failed", "doc:sent"}) || !strings.Contains(errs[0], "its document is gone") {
		t.Errorf("reports %v %v; want broken failed (why), doc sent, none not reported", list, errs)
	}
	if tok := <-got; tok != token {
		t.Errorf("posted %q; want the prepared token", tok)
	}
}
