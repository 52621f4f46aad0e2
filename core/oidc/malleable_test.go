package oidc

import (
	"context"
	"testing"

	"github.com/palmgate/palmgate/internal/jwttest"
)

// TestMalleatedTokensRefused: the high-s twin of an access or refresh token, and a
// copy with stray base64 bits, are refused everywhere the issuer verifies its own
// tokens, and a refused refresh token leaves the family as it was.
func TestMalleatedTokensRefused(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	_, resp := h.offline(t)
	for name, at := range map[string]string{"high s": jwttest.Malleate(t, resp.AccessToken), "stray bits": jwttest.StrayBits(resp.AccessToken)} {
		_, err := h.svc.VerifyAccessToken(ctx, at)
		wantError(t, err, ErrInvalidToken)
		if in, err := h.svc.Introspect(ctx, "app", at); err != nil || in.Active {
			t.Errorf("%s access token: Introspect = %+v, %v; want inactive", name, in, err)
		}
	}
	for name, rt := range map[string]string{"high s": jwttest.Malleate(t, resp.RefreshToken), "stray bits": jwttest.StrayBits(resp.RefreshToken)} {
		if in, err := h.svc.Introspect(ctx, "app", rt); err != nil || in.Active {
			t.Errorf("%s refresh token: Introspect = %+v, %v; want inactive", name, in, err)
		}
		wantError(t, h.rf("app", rt, ""), ErrInvalidGrant)
	}
	// The tokens as issued still work: nothing rotated or revoked the family.
	if _, err := h.svc.VerifyAccessToken(ctx, resp.AccessToken); err != nil {
		t.Fatalf("access token as issued: %v", err)
	}
	h.refresh(t, "app", resp.RefreshToken, "")
}
