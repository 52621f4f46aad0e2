package oidc

import (
	"context"
	"reflect"
	"testing"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/keys"
)

// TestRememberedClaimsAreThePayloads (2026-11-27): the bearer cache answers a
// token remembered at issuance with the claims its issuer kept, not those it
// parsed; they must be the claims the token's payload says, as a verifier with
// no cache reads them, for the code exchange, a refresh and the jwt-bearer grant.
func TestRememberedClaimsAreThePayloads(t *testing.T) {
	ctx := context.Background()
	check := func(t *testing.T, svc *Service, name, token string) {
		t.Helper()
		before := svc.access.CacheStats()
		remembered, err := svc.access.Verify(ctx, token)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if svc.access.CacheStats().Hits != before.Hits+1 {
			t.Fatalf("%s: not remembered", name)
		}
		fresh := bearer.NewVerifier(bearer.Config{Issuer: svc.issuer, Algorithm: keys.ES256, Keys: svc.keys, Now: svc.now, CacheSize: -1})
		parsed, err := fresh.Verify(ctx, token)
		if err != nil {
			t.Fatalf("%s, without the cache: %v", name, err)
		}
		if !reflect.DeepEqual(remembered, parsed) {
			t.Errorf("%s: remembered %+v, the payload says %+v", name, remembered, parsed)
		}
	}
	h := newHarness(t)
	l := h.login(t, params("scope", "openid offline_access"), "alice")
	tok, err := h.svc.ExchangeCode(ctx, "app", l.code, appRedirect, "")
	if err != nil {
		t.Fatal(err)
	}
	check(t, h.svc, "code exchange", tok.AccessToken)
	refreshed, err := h.svc.Refresh(ctx, "app", tok.RefreshToken, "")
	if err != nil {
		t.Fatal(err)
	}
	check(t, h.svc, "refresh", refreshed.AccessToken)

	a := newActorHarness(t)
	a.consent(t, "alice", "alice-bot", "scope", "openid orders:read")
	agentTok, err := a.agentToken(a.assertion(t, "alice-bot", a.aliceBotKey, nil))
	if err != nil {
		t.Fatal(err)
	}
	check(t, a.svc, "jwt-bearer", agentTok.AccessToken)
}
