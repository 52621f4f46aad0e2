package oidc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/palm"
)

// TestLoginBoundToBrowser: only the browser that made an authorization request
// (its binding secret) is told it is bound, gets the scan URL renewed, and gets
// the code; another browser gets ErrOtherBrowser and consumes nothing.
func TestLoginBoundToBrowser(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	ar := h.authorize(t, params())
	other := strings.Repeat("o", 43)

	for name, binding := range map[string]string{"another browser": other, "no cookie": ""} {
		st, err := h.svc.Login(ctx, ar.ID, binding, true)
		if err != nil || st.Bound {
			t.Errorf("Login from %s = bound %v, %v; want not bound", name, st != nil && st.Bound, err)
		}
	}
	h.clock.Advance(palm.ScanRenewAfter)
	st, _ := h.svc.Login(ctx, ar.ID, other, true)
	mine, err := h.svc.Login(ctx, ar.ID, testBinding, false)
	if err != nil || !mine.Bound || st.Challenge.Nonce != mine.Challenge.Nonce {
		t.Fatalf("another browser's page renewed the scan URL, or the right browser is not bound: %v", err)
	}
	h.scan(t, ar, "alice")
	if r, err := h.svc.Finish(ctx, ar.ID, other); r != nil || !errors.Is(err, ErrOtherBrowser) {
		t.Fatalf("Finish from another browser = %+v, %v; want ErrOtherBrowser", r, err)
	}
	r, err := h.svc.Finish(ctx, ar.ID, testBinding)
	if err != nil || r == nil || r.Code == "" {
		t.Fatalf("Finish from the right browser after another's try = %+v, %v; want the code", r, err)
	}
	if _, err := h.svc.Authorize(ctx, params(), Browser{Binding: "short"}); err == nil {
		t.Error("Authorize with a short binding secret succeeded")
	}
}

// TestLoginRequestContext: the challenge tells the person's app who asks, for
// what, when and from which browser.
func TestLoginRequestContext(t *testing.T) {
	h := newHarness(t)
	ar := h.authorize(t, params("scope", "openid offline_access"))
	st, err := h.svc.Login(context.Background(), ar.ID, testBinding, false)
	if err != nil {
		t.Fatal(err)
	}
	req := st.Challenge.Request
	if req.ClientName != "Example App" || req.BrowserIP != testBrowser.IP || req.BrowserSummary != testBrowser.Summary ||
		len(req.ScopeDescriptions) != 2 || !time.Time(req.RequestedAt).Equal(h.clock.Now()) {
		t.Errorf("challenge request = %+v, want the client's name, scopes in words, the browser and the time", req)
	}
}
