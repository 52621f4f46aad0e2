package oidc

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/memstore"
)

// TestSignedAheadRememberedOnlyWhenAnswered: tokens signed ahead of a commit
// reach the bearer cache only when answered; a signing left behind (its run of
// the transaction not committed) leaves the cache as it was.
func TestSignedAheadRememberedOnlyWhenAnswered(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	cl := h.svc.clients.get("app")
	scopes := []string{ScopeOpenID}
	left := h.svc.signAhead(cl, "grant-left", "app", "alice", scopes, "", time.Now(), "", "", time.Time{})
	answered := h.svc.signAhead(cl, "grant-answered", "app", "alice", scopes, "", time.Now(), "", "", time.Time{})
	resp, err := answered.answer()
	if err != nil {
		t.Fatal(err)
	}
	<-left.done
	before := h.svc.access.CacheStats()
	for _, tok := range []string{left.resp.AccessToken, resp.AccessToken} {
		if _, err := h.svc.access.Verify(ctx, tok); err != nil {
			t.Fatalf("a token signed ahead does not verify: %v", err)
		}
	}
	after := h.svc.access.CacheStats()
	if hits, misses := after.Hits-before.Hits, after.Misses-before.Misses; hits != 1 || misses != 1 {
		t.Errorf("cache hits %d, misses %d; want 1 and 1 (only the answered token remembered)", hits, misses)
	}
}

// TestExchangeAnswersOnlyACommit: an exchange whose commit is lost answers no
// tokens, whatever it signed ahead, and leaves the code unused; the exchange
// that commits answers tokens of that transaction, its access token
// remembered. The same for a refresh.
func TestExchangeAnswersOnlyACommit(t *testing.T) {
	ctx := context.Background()
	var fail atomic.Bool
	h := newHarnessOn(t, lostCommitStore{memstore.New(), &fail}, testSecret)
	l := h.login(t, params("scope", "openid offline_access"), "alice")
	fail.Store(true)
	if tok, err := h.svc.ExchangeCode(ctx, "app", l.code, appRedirect, ""); tok != nil || !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("exchange with its commit lost = %+v, %v; want no tokens and ErrUnavailable", tok, err)
	}
	fail.Store(false)
	tok, err := h.svc.ExchangeCode(ctx, "app", l.code, appRedirect, "")
	if err != nil || tok.AccessToken == "" || tok.IDToken == "" || tok.RefreshToken == "" {
		t.Fatalf("exchange after the lost commit = %+v, %v; want the three tokens", tok, err)
	}
	before := h.svc.access.CacheStats()
	claims, err := h.svc.access.Verify(ctx, tok.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	if after := h.svc.access.CacheStats(); after.Hits != before.Hits+1 {
		t.Error("the answered access token was not remembered")
	}
	// A refresh whose commit is lost answers nothing and rotates nothing.
	fail.Store(true)
	if got, err := h.svc.Refresh(ctx, "app", tok.RefreshToken, ""); got != nil || !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("refresh with its commit lost = %+v, %v; want no tokens and ErrUnavailable", got, err)
	}
	fail.Store(false)
	if _, err := h.svc.Refresh(ctx, "app", tok.RefreshToken, ""); err != nil {
		t.Errorf("the refresh token of the committed grant %s after a lost rotation: %v", claims.GrantID, err)
	}
}

// TestActorTokenAnswersOnlyACommit: the jwt-bearer grant's commit lost, no token
// is answered, whatever was signed ahead, and the assertion's jti stays unused;
// the request that commits answers a token, remembered by the bearer cache.
func TestActorTokenAnswersOnlyACommit(t *testing.T) {
	ctx := context.Background()
	var fail atomic.Bool
	h := newActorHarnessOn(t, lostCommitStore{memstore.New(), &fail})
	h.consent(t, "alice", "alice-bot", "scope", "openid orders:read")
	assertion := h.assertion(t, "alice-bot", h.aliceBotKey, nil)
	fail.Store(true)
	if tok, err := h.agentToken(assertion); tok != nil || !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("agent token with its commit lost = %+v, %v; want no token and ErrUnavailable", tok, err)
	}
	fail.Store(false)
	tok, err := h.agentToken(assertion)
	if err != nil || tok.AccessToken == "" {
		t.Fatalf("agent token after the lost commit = %+v, %v; want a token (the jti unused)", tok, err)
	}
	before := h.svc.access.CacheStats()
	if _, err := h.svc.access.Verify(ctx, tok.AccessToken); err != nil {
		t.Fatal(err)
	}
	if after := h.svc.access.CacheStats(); after.Hits != before.Hits+1 {
		t.Error("the answered access token was not remembered")
	}
}

// TestSigningNeverWaitsForASigner: with every signer busy and the queue full, a
// signing still starts, on a goroutine of its own: a transaction's fn, which
// starts it, must never wait (it may hold a group commit).
func TestSigningNeverWaitsForASigner(t *testing.T) {
	h := newHarness(t)
	release := make(chan struct{})
	defer close(release)
	signers.run(func() {}) // the signers are running
	// Occupy every signer, then fill the queue, with jobs that wait.
	for range runtime.GOMAXPROCS(0) + signQueue + 8 {
		done := make(chan struct{})
		go func() {
			signers.run(func() { <-release })
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("queueing a signing waited for a signer")
		}
	}
	cl := h.svc.clients.get("app")
	sig := h.svc.signAhead(cl, "grant-busy", "app", "alice", []string{ScopeOpenID}, "", time.Now(), "", "", time.Time{})
	select {
	case <-sig.done:
	case <-time.After(10 * time.Second):
		t.Fatal("a signing started while every signer was busy never finished")
	}
	if _, err := sig.answer(); err != nil {
		t.Fatal(err)
	}
}
