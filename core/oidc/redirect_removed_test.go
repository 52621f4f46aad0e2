package oidc

import (
	"context"
	"errors"
	"testing"
)

// TestRemovedRedirectURIGetsNothing checks that a redirect URI removed from a
// dynamic client while a login is under way receives nothing: the browser is not
// sent there, with a code or an error (RFC 6749 4.1.2.1: an invalid redirection
// URI must not be redirected to), and a code issued to it before the removal is
// refused at the token endpoint. Before the fix the pending login sent its code
// to the removed URI and the exchange accepted it, though the URI was removed
// because it was no longer the developer's.
func TestRemovedRedirectURIGetsNothing(t *testing.T) {
	ctx := context.Background()
	h := newSSOHarness(t, ssoTTL)
	ci, _ := h.createClient(t, "dev", appRedirect, otherRedir)
	narrow := func() {
		t.Helper()
		if _, err := h.svc.Clients().Update(ctx, ci.ID, "dev", ClientSpec{RedirectURIs: []string{appRedirect}}); err != nil {
			t.Fatalf("Update: %v", err)
		}
	}
	widen := func() {
		t.Helper()
		if _, err := h.svc.Clients().Update(ctx, ci.ID, "dev", ClientSpec{RedirectURIs: []string{appRedirect, otherRedir}}); err != nil {
			t.Fatalf("Update: %v", err)
		}
	}
	p := params("client_id", ci.ID, "redirect_uri", otherRedir)

	t.Run("verified login", func(t *testing.T) {
		ar := h.authorize(t, p)
		h.scan(t, ar, "alice")
		narrow()
		defer widen()
		r, err := h.svc.Finish(ctx, ar.ID, testBinding)
		if !errors.Is(err, ErrRedirectURINotRegistered) || r != nil {
			t.Fatalf("Finish = %+v, %v; want ErrRedirectURINotRegistered and no redirect", r, err)
		}
	})
	t.Run("cancelled login", func(t *testing.T) {
		ar := h.authorize(t, p)
		narrow()
		defer widen()
		step, err := h.svc.CancelLogin(ctx, ar.ID, testBinding, CancelToken(testBinding, ar.ID), "")
		if !errors.Is(err, ErrRedirectURINotRegistered) || step != nil {
			t.Fatalf("CancelLogin = %+v, %v; want ErrRedirectURINotRegistered and no redirect", step, err)
		}
	})
	t.Run("deleted client", func(t *testing.T) {
		other, _ := h.createClient(t, "dev", otherRedir)
		ar := h.authorize(t, params("client_id", other.ID, "redirect_uri", otherRedir))
		h.scan(t, ar, "alice")
		if err := h.svc.Clients().Delete(ctx, other.ID, "dev"); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		r, err := h.svc.Finish(ctx, ar.ID, testBinding)
		if !errors.Is(err, ErrUnknownClient) || r != nil {
			t.Fatalf("Finish = %+v, %v; want ErrUnknownClient and no redirect", r, err)
		}
	})
	t.Run("consent", func(t *testing.T) {
		_, sess := h.scanLogin(t, []string{"client_id", ci.ID, "redirect_uri", appRedirect}, "bob", "")
		ar, err := h.inSession(sess.ID, testBrowser, "client_id", ci.ID, "redirect_uri", otherRedir, "prompt", "consent")
		if err != nil || ar.Status != RequestConsent {
			t.Fatalf("Authorize in session = %+v, %v; want the consent page", ar, err)
		}
		st, err := h.svc.ConsentPage(ctx, ar.ID, testBinding)
		if err != nil {
			t.Fatalf("ConsentPage: %v", err)
		}
		narrow()
		defer widen()
		r, err := h.svc.Consent(ctx, ar.ID, testBinding, sess.ID, st.Token, true)
		if !errors.Is(err, ErrRedirectURINotRegistered) || r != nil {
			t.Fatalf("Consent = %+v, %v; want ErrRedirectURINotRegistered and no redirect", r, err)
		}
	})
	t.Run("code issued before the removal", func(t *testing.T) {
		l := h.login(t, p, "alice")
		narrow()
		defer widen()
		wantError(t, h.ex(ci.ID, l.code, otherRedir, ""), ErrInvalidGrant)
	})
	t.Run("the registered one still works", func(t *testing.T) {
		l := h.login(t, params("client_id", ci.ID), "alice")
		narrow()
		if err := h.ex(ci.ID, l.code, appRedirect, ""); err != nil {
			t.Fatalf("ExchangeCode with the URI still registered: %v", err)
		}
	})
}
