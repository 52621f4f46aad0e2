package oidc

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/storage/memstore"
)

// TestRetiredKeyStillEndsItsSessions (issue 20): keys retired by a rotation are
// dropped by KeyLifetimes. Until the last token of a login may have expired, the
// ID token of that login, long expired, still works as the id_token_hint of a
// logout that revokes it, although the RS256 key that signed it was retired (and
// the ID token lived only accessTTL); the refresh token, signed by a retired
// ES256 key, still refreshes until then.
func TestRetiredKeyStillEndsItsSessions(t *testing.T) {
	ctx := context.Background()
	h := newHarnessOn(t, memstore.New(), testSecret, keys.WithLifetimes(KeyLifetimes(accessTTL, refreshTTL)))
	tok := h.offlineLogin(t)
	other := h.offlineLogin(t)
	for _, alg := range keys.Algorithms {
		if _, err := h.keys.Rotate(ctx, alg); err != nil {
			t.Fatal(err)
		}
	}
	// Late in the refresh token's life: well past the ID token's, and past the
	// drop time a key kept only for its ID tokens (accessTTL) would have had.
	h.clock.Advance(refreshTTL - time.Minute)
	if accessTTL+keys.RetireMargin >= refreshTTL-time.Minute {
		t.Fatal("the TTLs of the harness make this test prove nothing")
	}
	out, err := h.svc.EndSession(ctx, url.Values{"id_token_hint": {tok.IDToken}, "client_id": {"app"}})
	if err != nil || out.GrantID == "" {
		t.Fatalf("EndSession with the hint of a retired key = %+v, %v; want the grant revoked", out, err)
	}
	if _, err := h.svc.Refresh(ctx, "app", tok.RefreshToken, ""); err == nil {
		t.Error("the logged out login still refreshes")
	}
	if _, err := h.svc.Refresh(ctx, "app", other.RefreshToken, ""); err != nil {
		t.Errorf("a refresh token signed by the retired ES256 key, still valid, is refused: %v", err)
	}
}

func TestKeyLifetimes(t *testing.T) {
	got := KeyLifetimes(time.Hour, 90*24*time.Hour)
	for _, alg := range keys.Algorithms {
		if got[alg] != 90*24*time.Hour {
			t.Errorf("%s: %s, want the refresh TTL", alg, got[alg])
		}
	}
	if got := KeyLifetimes(time.Hour, time.Minute); got[keys.ES256] != time.Hour || got[keys.RS256] != time.Hour {
		t.Errorf("with a refresh TTL below the access TTL: %v, want the access TTL", got)
	}
}
