package oidc

import (
	"context"
	"net/url"
	"testing"

	"github.com/palmgate/palmgate/storage"
)

// TestSingleLogoutStaleHintEndsNothingOfTheBrowser (fourth review): an ID
// token is no secret for ever (accepted expired, it sits in browser storage,
// logs, referers). A page holding the visitor's old hint, of a login that has
// already ended (revoked, or expired from the store), and sending the
// visitor's browser to the logout endpoint, ends the browser's session, as
// any logout does, but none of the logins made through it: only a hint of a
// login live until then shows an application asking.
func TestSingleLogoutStaleHintEndsNothingOfTheBrowser(t *testing.T) {
	ctx := context.Background()
	for _, how := range []string{"revoked", "expired from the store"} {
		t.Run(how, func(t *testing.T) {
			w := newSLOWorld(t)
			switch how {
			case "revoked": // the person signed out of that application long ago
				if out, err := w.h.svc.EndSession(ctx, url.Values{"id_token_hint": {w.alone.IDToken}}); err != nil || out.Logins != 1 {
					t.Fatalf("EndSession = %+v, %v", out, err)
				}
			default:
				err := w.h.store.Update(ctx, func(txn storage.Txn) error { return txn.Delete(grantKey(w.aloneID.GrantID)) })
				if err != nil {
					t.Fatal(err)
				}
			}
			w.sent.take()
			out, err := w.h.svc.EndSessionFrom(ctx, url.Values{"id_token_hint": {w.alone.IDToken}}, w.sess.ID)
			if err != nil {
				t.Fatal(err)
			}
			if out.Logins != 0 {
				t.Errorf("EndSession with a stale hint = %+v; want no login ended", out)
			}
			w.wantEnded(t, map[string]bool{"alone": true})
			if got := w.sent.take(); len(got) != 0 {
				t.Errorf("logout tokens sent: %d; want none", len(got))
			}
		})
	}
}

// TestSingleLogoutEndsCodesInFlight (fourth review): a code the session issued
// just before the logout, redeemed after it, is invalid_grant: the logout
// deletes the session's codes not yet redeemed (the index entry names its
// code), so no login the logout did not see starts afterwards.
func TestSingleLogoutEndsCodesInFlight(t *testing.T) {
	w := newSLOWorld(t)
	ctx := context.Background()
	code := wantCode(t)(w.h.inSession(w.sess.ID, testBrowser, "scope", "openid offline_access", "prompt", "none"))
	if _, err := w.h.svc.EndSession(ctx, url.Values{"id_token_hint": {w.a.IDToken}}); err != nil {
		t.Fatal(err)
	}
	resp, err := w.h.svc.ExchangeCode(ctx, "app", code, appRedirect, "")
	if err == nil {
		_, rerr := w.h.svc.Refresh(ctx, "app", resp.RefreshToken, "")
		t.Fatalf("a code of the session redeemed after its logout answered tokens (refresh then: %v); want invalid_grant", rerr)
	}
	wantError(t, err, ErrInvalidGrant)
}
