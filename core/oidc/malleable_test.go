package oidc

import (
	"context"
	"encoding/base64"
	"math/big"
	"strings"
	"testing"
)

// orderP256 is n, the order of P-256 (SEC 2, section 2.4.2).
var orderP256, _ = new(big.Int).SetString("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551", 16)

// malleate replaces the ES256 signature (r, s) of token by (r, n-s), which
// verifies just as well.
func malleate(t *testing.T, token string) string {
	t.Helper()
	i := strings.LastIndexByte(token, '.')
	sig, err := base64.RawURLEncoding.DecodeString(token[i+1:])
	if err != nil || len(sig) != 64 {
		t.Fatalf("not an ES256 signature: %v", err)
	}
	s := new(big.Int).SetBytes(sig[32:])
	new(big.Int).Sub(orderP256, s).FillBytes(sig[32:])
	return token[:i+1] + base64.RawURLEncoding.EncodeToString(sig)
}

// strayBits sets the unused low bits of the signature segment's last character.
func strayBits(token string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, token[len(token)-1])
	return token[:len(token)-1] + string(alphabet[last|0x0f])
}

// TestMalleatedTokensRefused: the high-s twin of an access or refresh token, and a
// copy with stray base64 bits, are refused everywhere the issuer verifies its own
// tokens, and a refused refresh token leaves the family as it was.
func TestMalleatedTokensRefused(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	_, resp := h.offline(t)
	for name, at := range map[string]string{"high s": malleate(t, resp.AccessToken), "stray bits": strayBits(resp.AccessToken)} {
		_, err := h.svc.VerifyAccessToken(ctx, at)
		wantError(t, err, ErrInvalidToken)
		if in, err := h.svc.Introspect(ctx, "app", at); err != nil || in.Active {
			t.Errorf("%s access token: Introspect = %+v, %v; want inactive", name, in, err)
		}
	}
	for name, rt := range map[string]string{"high s": malleate(t, resp.RefreshToken), "stray bits": strayBits(resp.RefreshToken)} {
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
