package oidc

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/storagetest"
)

// TestEndHumanSessions: the operator ends one person's SSO sessions (both of
// their browsers); another person's session still answers, and the person's
// tokens still work until the grants are revoked too, which ends their refresh
// and access tokens and consents, and leaves the other person's alone.
func TestEndHumanSessions(t *testing.T) {
	h := newSSOHarness(t, ssoTTL)
	ctx := context.Background()
	offline := []string{"scope", "openid offline_access"}
	alice1, aliceSess1 := h.scanLogin(t, offline, "alice", "")
	_, aliceSess2 := h.scanLogin(t, nil, "alice", "")
	bob, bobSess := h.scanLogin(t, offline, "bob", "")
	aliceTok, bobTok := h.exchange(t, alice1, ""), h.exchange(t, bob, "")
	if n := h.count(t, "oidc/sso-human/"+alice1.humanID+"/"); n != 2 {
		t.Fatalf("alice's index entries = %d, want 2 (one per session, written with it)", n)
	}

	n, err := h.svc.EndHuman(ctx, alice1.humanID, EndHumanOptions{})
	if err != nil || n != (HumanEnded{SSOSessions: 2}) {
		t.Fatalf("EndHuman(alice) = %+v, %v; want her 2 sessions ended", n, err)
	}
	for _, s := range []*Session{aliceSess1, aliceSess2} {
		wantScan(t)(h.inSession(s.ID, testBrowser))
	}
	wantCode(t)(h.inSession(bobSess.ID, testBrowser))
	if n := h.count(t, "oidc/sso-human/"+alice1.humanID+"/"); n != 0 {
		t.Errorf("alice's index entries after the end = %d, want 0", n)
	}
	// Sessions only: her tokens live on.
	aliceTok = h.refresh(t, "app", aliceTok.RefreshToken, "")

	n, err = h.svc.EndHuman(ctx, alice1.humanID, EndHumanOptions{Revoke: true})
	if err != nil || n.SSOSessions != 0 || n.Grants != 1 || n.Consents != 1 {
		t.Fatalf("EndHuman(alice, revoke) = %+v, %v; want her one grant and one consent", n, err)
	}
	_, err = h.svc.Refresh(ctx, "app", aliceTok.RefreshToken, "")
	wantError(t, err, ErrInvalidGrant)
	if _, err := h.svc.VerifyAccessToken(ctx, aliceTok.AccessToken); err == nil {
		t.Error("alice's access token still verifies after her grants were revoked")
	}
	if c, _ := h.svc.getConsentRead(ctx, alice1.humanID, "app"); c != nil {
		t.Errorf("alice's consent to app = %v after the revocation, want none", c)
	}
	if _, err := h.svc.VerifyAccessToken(ctx, bobTok.AccessToken); err != nil {
		t.Errorf("bob's access token: %v; want it untouched", err)
	}
	h.refresh(t, "app", bobTok.RefreshToken, "")
	wantCode(t)(h.inSession(bobSess.ID, testBrowser))

	// Run again (a retry): nothing left, zeros.
	if n, err := h.svc.EndHuman(ctx, alice1.humanID, EndHumanOptions{Revoke: true}); err != nil || n != (HumanEnded{}) {
		t.Errorf("EndHuman again = %+v, %v; want zeros", n, err)
	}
	for _, bad := range []string{"", "alice", "../x", "6BA7B810-9DAD-11D1-80B4-00C04FD430C8"} {
		_, err := h.svc.EndHuman(ctx, bad, EndHumanOptions{})
		if f, ok := fault.As(err); !ok || f.Class != fault.Invalid || !errors.Is(err, ErrInvalidHumanID) {
			t.Errorf("EndHuman(%q) = %v; want invalid humanId", bad, err)
		}
	}
}

// getConsentRead is getConsent in a transaction of its own.
func (s *Service) getConsentRead(ctx context.Context, humanID, clientID string) (c []string, err error) {
	err = s.store.View(ctx, func(txn storage.Txn) error {
		c, err = s.getConsent(txn, humanID, clientID)
		return err
	})
	return c, err
}

// TestSessionIndexFollowsTheSession: a logout and a new scan, which end a
// session, delete its index entry; the entry has the session's TTL; a session
// written before the index existed is found while the mark says such may live.
func TestSessionIndexFollowsTheSession(t *testing.T) {
	h := newSSOHarness(t, ssoTTL)
	ctx := context.Background()
	alice, first := h.scanLogin(t, nil, "alice", "")
	prefix := "oidc/sso-human/" + alice.humanID + "/"
	_, second := h.scanLogin(t, []string{"prompt", "login"}, "alice", first.ID) // replaces first
	if n := h.count(t, prefix); n != 1 {
		t.Fatalf("index entries after a new scan replaced the session = %d, want 1", n)
	}
	if ended, err := h.svc.EndSSOSession(ctx, second.ID); !ended || err != nil {
		t.Fatalf("EndSSOSession = %v, %v", ended, err)
	}
	if n := h.count(t, prefix); n != 0 {
		t.Fatalf("index entries after the logout = %d, want 0", n)
	}

	// A session of an earlier release: no index entry.
	_, third := h.scanLogin(t, nil, "alice", "")
	if err := h.store.Update(ctx, func(txn storage.Txn) error {
		return txn.Delete(sessionHumanKey(alice.humanID, sessionHash(third.ID)))
	}); err != nil {
		t.Fatal(err)
	}
	if n, err := h.svc.EndHuman(ctx, alice.humanID, EndHumanOptions{}); err != nil || n.SSOSessions != 1 {
		t.Fatalf("EndHuman with an unindexed session while the mark lives = %+v, %v; want it found", n, err)
	}
	wantScan(t)(h.inSession(third.ID, testBrowser))
	// The scan for unindexed sessions stops once none can live: sso_session and the
	// rollout after the first start that indexed, which a later start keeps.
	since := h.svc.indexSince
	h.clock.Advance(time.Minute)
	if again, err := sessionIndexSince(ctx, h.store, h.clock.Now()); err != nil || !again.Equal(since) {
		t.Errorf("a later start's sessionIndexSince = %v, %v; want the first start's %v", again, err, since)
	}
	h.clock.Advance(ssoTTL + legacyRollout)
	if got, err := h.svc.legacySessions(ctx, alice.humanID); err != nil || got != nil {
		t.Errorf("legacySessions past the rollout = %v, %v; want no scan", got, err)
	}

	// The index entry expires with its session: written with the same TTL.
	h.clock.Set(since)
	rec := &ttlStore{Store: h.store, ttl: map[string]time.Duration{}}
	h.svc.store = rec
	h.scanLogin(t, nil, "alice", "")
	if rec.ttl["oidc/sso/"] != ssoTTL || rec.ttl["oidc/sso-human/"] != ssoTTL {
		t.Fatalf("TTLs written = %v; want the session's and its index entry's both %s", rec.ttl, ssoTTL)
	}
}

// ttlStore records the TTL of the last Set under each kind (records' first two
// segments, with their slash).
type ttlStore struct {
	storage.Store
	ttl map[string]time.Duration
}

type ttlTxn struct {
	storage.Txn
	ttl map[string]time.Duration
}

func (s *ttlStore) Update(ctx context.Context, fn func(storage.Txn) error) error {
	return s.Store.Update(ctx, func(txn storage.Txn) error { return fn(ttlTxn{txn, s.ttl}) })
}

func (t ttlTxn) Set(key, value []byte, ttl time.Duration) error {
	parts := strings.SplitN(string(key), "/", 3)
	if len(parts) == 3 {
		t.ttl[parts[0]+"/"+parts[1]+"/"] = ttl
	}
	return t.Txn.Set(key, value, ttl)
}

// TestEndHumanAllOrNothing: when a part of the end fails (here the sessions
// another package keeps), nothing is ended; a store that is down is an
// unavailable fault (the admin API's 503).
func TestEndHumanAllOrNothing(t *testing.T) {
	h := newSSOHarness(t, ssoTTL)
	ctx := context.Background()
	alice, sess := h.scanLogin(t, []string{"scope", "openid offline_access"}, "alice", "")
	tok := h.exchange(t, alice, "")
	boom := errors.New("boom")
	_, err := h.svc.EndHuman(ctx, alice.humanID, EndHumanOptions{Revoke: true, Also: func(storage.Txn) error { return boom }})
	if !errors.Is(err, boom) {
		t.Fatalf("EndHuman with a failing part = %v; want its error", err)
	}
	wantCode(t)(h.inSession(sess.ID, testBrowser))
	if _, err := h.svc.VerifyAccessToken(ctx, tok.AccessToken); err != nil {
		t.Fatalf("access token after a failed end: %v; want it still good", err)
	}
	tok = h.refresh(t, "app", tok.RefreshToken, "")

	down := &storagetest.DownStore{Store: h.store}
	h.svc.store = down
	down.Down.Store(true)
	_, err = h.svc.EndHuman(ctx, alice.humanID, EndHumanOptions{Revoke: true})
	if f, ok := fault.As(err); !ok || f.Class != fault.Unavailable {
		t.Fatalf("EndHuman with the store down = %v; want unavailable", err)
	}
	down.Down.Store(false)
	wantCode(t)(h.inSession(sess.ID, testBrowser))
	h.refresh(t, "app", tok.RefreshToken, "")
}

// TestEndHumanRevokesAgentGrants: revoking a person's grants ends their agents'
// grants (the jwt-bearer grant refuses, the live token is refused at once) and
// leaves another person's agents alone.
func TestEndHumanRevokesAgentGrants(t *testing.T) {
	ctx := context.Background()
	h := newActorHarness(t)
	h.consent(t, "alice", "alice-bot")
	h.consent(t, "bob", "bob-bot")
	aliceBot, err := h.agentToken(h.assertion(t, "alice-bot", h.aliceBotKey, nil))
	if err != nil {
		t.Fatal(err)
	}
	bobBot, err := h.agentToken(h.assertion(t, "bob-bot", h.bobBotKey, nil))
	if err != nil {
		t.Fatal(err)
	}
	n, err := h.svc.EndHuman(ctx, h.alice, EndHumanOptions{Revoke: true})
	if err != nil || n.AgentGrants != 1 {
		t.Fatalf("EndHuman(alice, revoke) = %+v, %v; want her agent's grant", n, err)
	}
	if _, err := h.svc.VerifyAccessToken(ctx, aliceBot.AccessToken); err == nil {
		t.Error("alice's agent's token still verifies")
	}
	if _, err := h.agentToken(h.assertion(t, "alice-bot", h.aliceBotKey, nil)); err == nil {
		t.Error("alice's agent still gets tokens")
	}
	if _, err := h.svc.VerifyAccessToken(ctx, bobBot.AccessToken); err != nil {
		t.Errorf("bob's agent's token: %v; want it untouched", err)
	}
	b, _ := json.Marshal(n)
	t.Logf("ended: %s", b)
}

// TestEndHumanRevokesCodesInFlight: a code issued before the end and redeemed
// after it would start a new grant, with refresh and access tokens the end was
// meant to revoke: revoking a person's grants also ends their unused codes.
func TestEndHumanRevokesCodesInFlight(t *testing.T) {
	h := newSSOHarness(t, ssoTTL)
	ctx := context.Background()
	alice, _ := h.scanLogin(t, []string{"scope", "openid offline_access"}, "alice", "")
	bob, _ := h.scanLogin(t, []string{"scope", "openid offline_access"}, "bob", "")
	n, err := h.svc.EndHuman(ctx, alice.humanID, EndHumanOptions{Revoke: true})
	if err != nil {
		t.Fatal(err)
	}
	if n.Codes != 1 {
		t.Errorf("EndHuman = %+v; want alice's one unused code ended", n)
	}
	_, err = h.svc.ExchangeCode(ctx, "app", alice.code, "https://app.example.test/cb", "")
	wantError(t, err, ErrInvalidGrant)
	h.exchange(t, bob, "")
}

// TestEndHumanCatchesAGrantStartedMeanwhile: a code redeemed between the listing
// of the person's grants and the end's transaction starts a grant the listing
// did not see; the pass after the commit revokes it.
func TestEndHumanCatchesAGrantStartedMeanwhile(t *testing.T) {
	h := newSSOHarness(t, ssoTTL)
	ctx := context.Background()
	alice, _ := h.scanLogin(t, []string{"scope", "openid offline_access"}, "alice", "")
	var tok *TokenResponse
	hook := &hookStore{Store: h.store}
	hook.before = func() { tok = h.exchange(t, alice, "") }
	h.svc.store = hook
	n, err := h.svc.EndHuman(ctx, alice.humanID, EndHumanOptions{Revoke: true})
	if err != nil || tok == nil || n.Grants != 1 || n.Codes != 0 {
		t.Fatalf("EndHuman = %+v, %v (exchanged meanwhile: %v); want the grant started meanwhile revoked", n, err, tok != nil)
	}
	_, err = h.svc.Refresh(ctx, "app", tok.RefreshToken, "")
	wantError(t, err, ErrInvalidGrant)
	if _, err := h.svc.VerifyAccessToken(ctx, tok.AccessToken); err == nil {
		t.Error("the access token of the grant started meanwhile still verifies")
	}
}

// hookStore runs before once, at the start of its first Update.
type hookStore struct {
	storage.Store
	before func()
}

func (s *hookStore) Update(ctx context.Context, fn func(storage.Txn) error) error {
	if b := s.before; b != nil {
		s.before = nil
		b()
	}
	return s.Store.Update(ctx, fn)
}

// TestHumanBySubject: the operator turns the pairwise sub a client received into
// the person's humanId, for a relying party's support desk; another client's sub
// of the same person, or an unknown client, finds no one.
func TestHumanBySubject(t *testing.T) {
	h := newSSOHarness(t, ssoTTL)
	ctx := context.Background()
	alice, _ := h.scanLogin(t, nil, "alice", "")
	h.scanLogin(t, nil, "bob", "")
	tok := h.exchange(t, alice, "")
	var ac AccessClaims
	h.parseToken(t, tok.AccessToken, "ES256", &ac)
	if got, err := h.svc.HumanBySubject(ctx, "app", ac.Subject); err != nil || got != alice.humanID {
		t.Fatalf("HumanBySubject(app, alice's sub) = %q, %v; want %s", got, err, alice.humanID)
	}
	for _, c := range []struct{ client, sub string }{{"app", "nobody"}, {"app", ""}, {"no-such-client", ac.Subject}} {
		if got, err := h.svc.HumanBySubject(ctx, c.client, c.sub); err == nil {
			t.Errorf("HumanBySubject(%q, %q) = %q; want an error", c.client, c.sub, got)
		}
	}
}

// TestEndHumanEndsAVerifiedLoginNotYetFinished (fourth review): a palm scan
// verified before the end whose browser had not yet fetched the answer (its
// login page polls) would, after the end, start a new SSO session and get a
// code: the person's session outlived the end. The end answers such a login
// access_denied; another person's verified login still finishes.
func TestEndHumanEndsAVerifiedLoginNotYetFinished(t *testing.T) {
	h := newSSOHarness(t, ssoTTL)
	ctx := context.Background()
	verified := func(who string) (*AuthRequest, string) {
		ar, err := h.svc.Authorize(ctx, params("scope", "openid offline_access"), testBrowser)
		if err != nil || ar.ChallengeID == "" {
			t.Fatalf("Authorize = %+v, %v; want a palm challenge", ar, err)
		}
		return ar, h.scan(t, ar, who) // verified; the browser has not polled yet
	}
	aliceAR, alice := verified("alice")
	bobAR, _ := verified("bob")
	n, err := h.svc.EndHuman(ctx, alice, EndHumanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	step, err := h.svc.LoginPage(ctx, aliceAR.ID, testBinding, LoginOptions{Finish: true})
	if err != nil {
		t.Fatalf("LoginPage after the end: %v", err)
	}
	if step.Session != nil || step.Redirect == nil || step.Redirect.Code != "" || step.Redirect.Error != ErrAccessDenied {
		t.Fatalf("alice's login verified before the end, finished after it = session %v, redirect %+v; want access_denied and no session", step.Session != nil, step.Redirect)
	}
	if n.Logins != 1 {
		t.Errorf("EndHuman = %+v; want her one verified login counted", n)
	}
	if step, err := h.svc.LoginPage(ctx, bobAR.ID, testBinding, LoginOptions{Finish: true}); err != nil || step.Redirect == nil || step.Redirect.Code == "" {
		t.Fatalf("bob's verified login = %+v, %v; want a code", step, err)
	}
}
