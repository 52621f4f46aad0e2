package oidc

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/event/eventtest"
	"github.com/palmgate/palmgate/storage"
)

// TestSingleLogoutStaleHintEndsNothingOfTheBrowser (2026-11-27): an ID
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

// TestSingleLogoutEndsCodesInFlight (2026-11-27): a code the session issued
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

// TestSingleLogoutAfterANewScan (2026-11-27): a new palm scan in the same
// browser (prompt=login, max_age) starts a new session and ends the one the
// browser held; when the same person scans, the logins made through the old
// one stay the browser's: a logout of a login of the new session ends them
// too, from the browser and from a server alike. Another person's scan in
// that browser takes none of them.
func TestSingleLogoutAfterANewScan(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name        string
		cookie, old bool
	}{{"new login's hint, browser", true, false}, {"new login's hint, backend", false, false}, {"old login's hint, backend", false, true}} {
		w := newSLOWorld(t)
		l, sess2 := w.h.scanLogin(t, []string{"prompt", "login"}, "alice", w.sess.ID)
		c := w.h.exchange(t, l, "")
		browser, hint := "", c.IDToken
		if tc.cookie {
			browser = sess2.ID
		}
		if tc.old {
			hint = w.a.IDToken
		}
		out, err := w.h.svc.EndSessionFrom(ctx, url.Values{"id_token_hint": {hint}}, browser)
		if err != nil || out.Logins != 4 {
			t.Errorf("%s: EndSession = %+v, %v; want the new login and the old session's 3 ended", tc.name, out, err)
		}
		w.wantEnded(t, map[string]bool{"a": true, "b": true, "b2": true})
		if _, err := w.h.svc.Refresh(ctx, "app", c.RefreshToken, ""); c.RefreshToken != "" && err == nil {
			t.Errorf("%s: the new login's refresh still works", tc.name)
		}
		if _, err := w.h.svc.VerifyAccessToken(ctx, c.AccessToken); err == nil {
			t.Errorf("%s: the new login's access token still works", tc.name)
		}
		_, err = w.h.inSession(sess2.ID, testBrowser, "prompt", "none")
		wantError(t, err, ErrLoginRequired)
	}
	t.Run("another person", func(t *testing.T) {
		w := newSLOWorld(t)
		l, _ := w.h.scanLogin(t, []string{"prompt", "login"}, "bob", w.sess.ID)
		c := w.h.exchange(t, l, "")
		out, err := w.h.svc.EndSession(ctx, url.Values{"id_token_hint": {c.IDToken}})
		if err != nil || out.Logins != 1 {
			t.Errorf("EndSession = %+v, %v; want bob's login alone", out, err)
		}
		w.wantEnded(t, nil)
	})
}

// TestCarriedLoginsKeptWithTheNewSession (2026-11-27): a login carried into
// the same person's new session is kept in the store as long as that one, as
// a login made through it (grant.KeepUntil): a logout late in the new session
// still finds it, and tells its client, after its tokens expired.
func TestCarriedLoginsKeptWithTheNewSession(t *testing.T) {
	w := newSLOWorld(t)
	w.h.clock.Advance(time.Hour)
	ts := &ttlStore{Store: w.h.store, ttl: map[string]time.Duration{}}
	w.h.svc.store = ts
	w.h.scanLogin(t, []string{"prompt", "login"}, "alice", w.sess.ID)
	if got := ts.ttl["oidc/grant/"]; got < ssoTTL {
		t.Errorf("a carried login's record kept %s; want the new session's %s", got, ssoTTL)
	}
}

// TestSingleLogoutEventNamesThePerson (2026-11-27): the logout's event (the
// audit entry `logout`) names the person whose logins it ended: a single
// logout ends logins at other applications than its client_id, and the
// operator asked why B signed someone out finds them by humanId.
func TestSingleLogoutEventNamesThePerson(t *testing.T) {
	w := newSLOWorld(t)
	alice := w.h.humanOf(t, "alice")
	var rec eventtest.Recorder
	w.h.svc.events = rec.Sink()
	if _, err := w.h.svc.EndSession(context.Background(), url.Values{"id_token_hint": {w.a.IDToken}}); err != nil {
		t.Fatal(err)
	}
	want := event.Event{Kind: event.Logout, Outcome: event.Revoked, ClientID: "other", HumanID: alice}
	if got := rec.Take(); len(got) != 1 || got[0] != want {
		t.Errorf("events = %+v; want %+v", got, want)
	}
}

// TestStaleHintFollowsNoNewerSession (2026-11-27): a hint of a login
// already revoked ends the logins of the session it was made through, not of
// the sessions the person's later scans in that browser started: as with the
// browser's cookie, an old hint may be anyone's copy.
func TestStaleHintFollowsNoNewerSession(t *testing.T) {
	w := newSLOWorld(t)
	ctx := context.Background()
	if err := w.h.svc.revoke(ctx, w.aID.GrantID); err != nil { // a's login ended alone (a reused refresh token, say)
		t.Fatal(err)
	}
	l, _ := w.h.scanLogin(t, []string{"prompt", "login", "scope", "openid offline_access"}, "alice", w.sess.ID)
	c := w.h.exchange(t, l, "")
	if _, err := w.h.svc.EndSession(ctx, url.Values{"id_token_hint": {w.a.IDToken}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.h.svc.Refresh(ctx, "app", c.RefreshToken, ""); err != nil {
		t.Errorf("the login of the newer session, after a logout with an old hint: refresh refused (%v); want it to go on", err)
	}
}
