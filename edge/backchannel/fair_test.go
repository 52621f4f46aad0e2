package backchannel

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/oidc"
)

// TestSlowClientDoesNotStarveOthers (fourth review): a relying party that
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
