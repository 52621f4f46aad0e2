package oidc

import (
	"context"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/storage"
)

// sloWorld is one person's logins for the single logout tests: a and b signed
// in through one SSO session (b silently, twice: once through the consent
// page, once answered at once), alone by a palm scan outside any session,
// elsewhere in another session.
type sloWorld struct {
	h                  *harness
	sent               *sentLogouts
	sess, otherSess    *Session
	a, b, b2           *TokenResponse
	alone, elsewhere   *TokenResponse
	aID, bID, b2ID     IDClaims
	aloneID, elseID    IDClaims
	sessionLoginGrants []string
}

func newSLOWorld(t *testing.T) *sloWorld {
	t.Helper()
	ctx := context.Background()
	w := &sloWorld{h: newSSOHarness(t, ssoTTL)}
	h := w.h
	w.sent = withBackchannel(h, "app", "other")
	// a: client other, by a palm scan that starts the session.
	l, sess := h.scanLogin(t, []string{"client_id", "other", "redirect_uri", otherRedir}, "alice", "")
	w.sess = sess
	w.a = h.exchange(t, l, "")
	// b: client app through the session, after the consent page.
	ar, err := h.inSession(sess.ID, testBrowser, "scope", "openid offline_access")
	if err != nil || ar.Status != RequestConsent {
		t.Fatalf("Authorize = %+v, %v; want the consent page", ar, err)
	}
	st, err := h.svc.ConsentPage(ctx, ar.ID, testBinding)
	if err != nil {
		t.Fatal(err)
	}
	r, err := h.svc.Consent(ctx, ar.ID, testBinding, sess.ID, st.Token, true)
	if err != nil || r.Code == "" {
		t.Fatalf("Consent = %+v, %v", r, err)
	}
	if w.b, err = h.svc.ExchangeCode(ctx, "app", r.Code, appRedirect, ""); err != nil {
		t.Fatal(err)
	}
	// b2: client app again, answered by the session at once.
	code := wantCode(t)(h.inSession(sess.ID, testBrowser, "scope", "openid offline_access", "prompt", "none"))
	if w.b2, err = h.svc.ExchangeCode(ctx, "app", code, appRedirect, ""); err != nil {
		t.Fatal(err)
	}
	// alone: a palm scan with sso_session off (no session at all).
	h.svc.ssoTTL = 0
	w.alone = h.exchange(t, h.login(t, params("scope", "openid offline_access"), "alice"), "")
	h.svc.ssoTTL = ssoTTL
	// elsewhere: a palm scan that starts another session (another browser).
	l, w.otherSess = h.scanLogin(t, []string{"scope", "openid offline_access"}, "alice", "")
	w.elsewhere = h.exchange(t, l, "")
	for tok, c := range map[string]*IDClaims{w.a.IDToken: &w.aID, w.b.IDToken: &w.bID, w.b2.IDToken: &w.b2ID,
		w.alone.IDToken: &w.aloneID, w.elsewhere.IDToken: &w.elseID} {
		*c = idClaims(t, tok)
	}
	w.sent.take() // none yet
	return w
}

// wantEnded checks which of w's logins ended (refresh refused, access tokens
// refused by the verifier) and which go on.
func (w *sloWorld) wantEnded(t *testing.T, ended map[string]bool) {
	t.Helper()
	ctx := context.Background()
	for name, tok := range map[string]*TokenResponse{"a": w.a, "b": w.b, "b2": w.b2, "alone": w.alone, "elsewhere": w.elsewhere} {
		_, err := w.h.svc.VerifyAccessToken(ctx, tok.AccessToken)
		if (err != nil) != ended[name] {
			t.Errorf("login %s: access token refused = %v; want %v (%v)", name, err != nil, ended[name], err)
		}
		if tok.RefreshToken == "" {
			continue
		}
		_, err = w.h.svc.Refresh(ctx, "app", tok.RefreshToken, "")
		if (err != nil) != ended[name] {
			t.Errorf("login %s: refresh refused = %v; want %v (%v)", name, err != nil, ended[name], err)
		}
	}
}

// sids are the sid claims of logout tokens sent, by client.
func sids(t *testing.T, h *harness, sent []BackchannelLogout) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, l := range sent {
		var c LogoutClaims
		if _, _, err := jwt.NewParser().ParseUnverified(l.Token, &c); err != nil {
			t.Fatal(err)
		}
		if len(c.Audience) != 1 || c.Audience[0] != l.ClientID {
			t.Errorf("logout token aud %v for client %s", c.Audience, l.ClientID)
		}
		out[l.ClientID] = append(out[l.ClientID], c.SID)
		slices.Sort(out[l.ClientID])
	}
	return out
}

// TestSingleLogout: a logout with client other's id_token_hint ends the SSO
// session and every login made through it (other's, and app's two made
// silently through the session): their refresh tokens and access tokens are
// refused, and each client with a backchannel_logout_uri is told once per
// login, with that login's sid. The same person's login by a scan outside any
// session, and the one in another session, go on. From the browser (its
// cookie) and from a server with the hint alone (oauth2-proxy's backend
// logout), the same.
func TestSingleLogout(t *testing.T) {
	for _, cookie := range []bool{true, false} {
		name := "backend (hint, no cookie)"
		if cookie {
			name = "browser (hint and cookie)"
		}
		t.Run(name, func(t *testing.T) {
			w := newSLOWorld(t)
			ctx := context.Background()
			browser := ""
			if cookie {
				browser = w.sess.ID
			}
			out, err := w.h.svc.EndSessionFrom(ctx, url.Values{"id_token_hint": {w.a.IDToken}}, browser)
			if err != nil {
				t.Fatalf("EndSession: %v", err)
			}
			if out.GrantID != w.aID.GrantID || out.Logins != 3 {
				t.Errorf("EndSession = %+v; want a's grant and 3 logins ended", out)
			}
			w.wantEnded(t, map[string]bool{"a": true, "b": true, "b2": true})
			want := map[string][]string{"other": {w.aID.GrantID}, "app": {w.bID.GrantID, w.b2ID.GrantID}}
			slices.Sort(want["app"])
			got := sids(t, w.h, w.sent.take())
			if len(got) != 2 || !slices.Equal(got["other"], want["other"]) || !slices.Equal(got["app"], want["app"]) {
				t.Errorf("logout tokens' sids = %v; want %v", got, want)
			}
			_, err = w.h.inSession(w.sess.ID, testBrowser, "prompt", "none")
			wantError(t, err, ErrLoginRequired)
			wantCode(t)(w.h.inSession(w.otherSess.ID, testBrowser, "prompt", "none"))
			// Again: nothing live is left to end, nobody is told twice.
			if out, err := w.h.svc.EndSessionFrom(ctx, url.Values{"id_token_hint": {w.b.IDToken}}, browser); err != nil || out.Logins != 0 {
				t.Errorf("EndSession again = %+v, %v; want no login ended", out, err)
			}
			if got := w.sent.take(); len(got) != 0 {
				t.Errorf("sent again: %v", got)
			}
		})
	}
}

// TestSingleLogoutWithoutHint: a logout without id_token_hint (anyone's page
// can send it) ends the browser's SSO session only: every login goes on.
func TestSingleLogoutWithoutHint(t *testing.T) {
	w := newSLOWorld(t)
	ctx := context.Background()
	out, err := w.h.svc.EndSessionFrom(ctx, url.Values{"client_id": {"app"}}, w.sess.ID)
	if err != nil || out.GrantID != "" || out.Logins != 0 {
		t.Fatalf("EndSession = %+v, %v; want nothing revoked", out, err)
	}
	if ended, err := w.h.svc.EndSSOSession(ctx, w.sess.ID); !ended || err != nil {
		t.Fatalf("EndSSOSession = %v, %v", ended, err)
	}
	w.wantEnded(t, nil)
	if got := w.sent.take(); len(got) != 0 {
		t.Errorf("logout tokens sent: %v; want none", got)
	}
}

// TestSingleLogoutCookieOfTheSamePerson: a hint of a login outside the
// browser's session (a scan with no session) ends the browser's session's
// logins too when it names the session's person; a hint of another person
// ends only its own login (a page holding someone's ID token cannot end the
// logins of whoever's browser visits it), the session itself as before.
func TestSingleLogoutCookieOfTheSamePerson(t *testing.T) {
	ctx := context.Background()
	t.Run("same person", func(t *testing.T) {
		w := newSLOWorld(t)
		out, err := w.h.svc.EndSessionFrom(ctx, url.Values{"id_token_hint": {w.alone.IDToken}}, w.sess.ID)
		if err != nil || out.Logins != 4 {
			t.Fatalf("EndSession = %+v, %v; want alone's and the session's 3 logins ended", out, err)
		}
		w.wantEnded(t, map[string]bool{"a": true, "b": true, "b2": true, "alone": true})
	})
	t.Run("another person", func(t *testing.T) {
		w := newSLOWorld(t)
		bobHint, _ := w.h.idTokenOf(t, "bob")
		out, err := w.h.svc.EndSessionFrom(ctx, url.Values{"id_token_hint": {bobHint}}, w.sess.ID)
		if err != nil || out.Logins != 1 {
			t.Fatalf("EndSession = %+v, %v; want bob's login alone ended", out, err)
		}
		w.wantEnded(t, nil)
	})
}

// TestSSOGrantIndex: a code issued through an SSO session carries the grant id
// it will start, and its index entry is written in the code's transaction,
// kept as long as the session lives (then gone with it); the exchange starts
// that grant, which records the session.
func TestSSOGrantIndex(t *testing.T) {
	h := newSSOHarness(t, ssoTTL)
	ctx := context.Background()
	l, sess := h.scanLogin(t, nil, "alice", "")
	var rec codeRecord
	err := h.store.View(ctx, func(txn storage.Txn) error {
		b, err := txn.Get(codeKey(l.code))
		if err == nil {
			rec, err = decodeCode(b)
		}
		return err
	})
	if err != nil || rec.PlannedGrant == "" || rec.Session != sessionHash(sess.ID) {
		t.Fatalf("code record = %+v, %v; want a planned grant and the session", rec, err)
	}
	if n := h.count(t, string(ssoGrantPrefix(sessionHash(sess.ID)))); n != 1 {
		t.Fatalf("index entries = %d; want 1", n)
	}
	tok := h.exchange(t, l, "")
	if id := idClaims(t, tok.IDToken); id.GrantID != rec.PlannedGrant {
		t.Errorf("sid %s; want the planned grant %s", id.GrantID, rec.PlannedGrant)
	}
	g, err := readGrant(ctx, h.store, rec.PlannedGrant)
	if err != nil || g.Session != sessionHash(sess.ID) {
		t.Fatalf("grant = %+v, %v; want the session recorded", g, err)
	}
	// The entry is written with the session's remaining life: with the code
	// of the scan that starts it, and with a code the session answers later.
	ts := &ttlStore{Store: h.store, ttl: map[string]time.Duration{}}
	h.svc.store = ts
	_, sess = h.scanLogin(t, []string{"prompt", "login"}, "alice", sess.ID)
	if ts.ttl["oidc/sso-grant/"] != ssoTTL {
		t.Errorf("TTLs written = %v; want the index entry's %s", ts.ttl, ssoTTL)
	}
	h.clock.Advance(time.Hour)
	code := wantCode(t)(h.inSession(sess.ID, testBrowser, "prompt", "none"))
	if ts.ttl["oidc/sso-grant/"] != ssoTTL-time.Hour {
		t.Errorf("TTLs written = %v; want the index entry's %s", ts.ttl, ssoTTL-time.Hour)
	}
	// Its grant (no offline_access: its tokens end within access_token_ttl) is
	// kept as long as the session, so a logout later still finds it and tells
	// its client, whose own session may still live.
	if _, err := h.svc.ExchangeCode(ctx, "app", code, appRedirect, ""); err != nil {
		t.Fatal(err)
	}
	if got := ts.ttl["oidc/grant/"]; got < ssoTTL-time.Hour {
		t.Errorf("the grant's TTL = %s; want at least the session's remaining %s", got, ssoTTL-time.Hour)
	}
}

// TestCodeWithoutPlannedGrant: a code issued by an earlier release (no planned
// grant id, no session) still exchanges, for a new grant id, as before.
func TestCodeWithoutPlannedGrant(t *testing.T) {
	h := newSSOHarness(t, ssoTTL)
	ctx := context.Background()
	code := "code-of-an-earlier-release-0123456789abcdefghij"
	old := `{"clientId":"app","redirectUri":"` + appRedirect + `","scopes":["openid"],"humanId":"` + h.humanOf(t, "alice") +
		`","authTime":"` + h.clock.Now().UTC().Format(time.RFC3339) + `","expiresAt":"` + h.clock.Now().Add(codeTTL).UTC().Format(time.RFC3339) + `"}`
	err := h.store.Update(ctx, func(txn storage.Txn) error { return txn.Set(codeKey(code), []byte(old), codeTTL) })
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h.svc.ExchangeCode(ctx, "app", code, appRedirect, "")
	if err != nil {
		t.Fatalf("ExchangeCode of an earlier release's code: %v", err)
	}
	if id := idClaims(t, resp.IDToken); id.GrantID == "" {
		t.Error("no sid")
	}
}
