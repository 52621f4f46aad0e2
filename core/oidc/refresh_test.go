package oidc

import (
	"context"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/keys"
)

// offline logs alice in to app with offline_access (and profile) and exchanges the code.
func (h *harness) offline(t *testing.T) (login, *TokenResponse) {
	t.Helper()
	l := h.login(t, params("scope", "openid offline_access profile"), "alice")
	return l, h.exchange(t, l, "")
}

func (h *harness) refresh(t *testing.T, client, token, scope string) *TokenResponse {
	t.Helper()
	resp, err := h.svc.Refresh(context.Background(), client, token, scope)
	if err != nil {
		t.Fatalf("Refresh(%s, scope %q): %v", client, scope, err)
	}
	return resp
}

func TestRefreshRotation(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	_, first := h.offline(t)
	var firstAC AccessClaims
	h.parseToken(t, first.AccessToken, keys.ES256, &firstAC)

	h.clock.Advance(time.Hour)
	second := h.refresh(t, "app", first.RefreshToken, "")
	third := h.refresh(t, "app", second.RefreshToken, "")

	for name, resp := range map[string]*TokenResponse{"second": second, "third": third} {
		t.Run(name, func(t *testing.T) {
			if resp.RefreshToken == "" || resp.RefreshToken == first.RefreshToken || resp.AccessToken == first.AccessToken {
				t.Errorf("response = %+v", resp)
			}
			if resp.Scope != "offline_access openid profile" {
				t.Errorf("scope = %q", resp.Scope)
			}
			// The family ends when the first token would have: no sliding expiry.
			if want := int64((refreshTTL - time.Hour) / time.Second); resp.RefreshTokenExpiresIn < want-1 || resp.RefreshTokenExpiresIn > want {
				t.Errorf("refresh_token_expires_in = %d, want %d", resp.RefreshTokenExpiresIn, want)
			}
			ac, err := h.svc.VerifyAccessToken(ctx, resp.AccessToken)
			if err != nil {
				t.Fatalf("VerifyAccessToken: %v", err)
			}
			if ac.Subject != firstAC.Subject || ac.GrantID != firstAC.GrantID || ac.AuthTime != firstAC.AuthTime {
				t.Errorf("access claims = %+v, want sub, sid and auth_time of %+v", ac, firstAC)
			}
			var ic IDClaims
			h.parseToken(t, resp.IDToken, keys.RS256, &ic)
			if ic.Subject != firstAC.Subject || ic.Nonce != "" || ic.AuthTime != firstAC.AuthTime {
				t.Errorf("ID claims = %+v", ic)
			}
		})
	}
	if second.RefreshToken == third.RefreshToken {
		t.Error("rotation repeated a refresh token")
	}

	// Reusing a rotated token revokes the whole family, the newest token included.
	_, err := h.svc.Refresh(ctx, "app", first.RefreshToken, "")
	wantError(t, err, ErrInvalidGrant)
	_, err = h.svc.Refresh(ctx, "app", third.RefreshToken, "")
	wantError(t, err, ErrInvalidGrant)
	for name, tok := range map[string]string{"first": first.AccessToken, "second": second.AccessToken, "third": third.AccessToken} {
		if _, err := h.svc.VerifyAccessToken(ctx, tok); err == nil {
			t.Errorf("%s access token still verifies after the family was revoked", name)
		}
	}
	// A new login starts a new family.
	l2 := h.login(t, params("scope", "openid offline_access"), "alice")
	fresh := h.exchange(t, l2, "")
	h.refresh(t, "app", fresh.RefreshToken, "")
}

func TestRefreshRefused(t *testing.T) {
	tests := []struct {
		name string
		// call refreshes with a fault, given the first token response.
		call func(h *harness, first *TokenResponse) error
		code string
		// usable reports whether the first refresh token still works afterwards.
		usable bool
	}{
		{"another client", func(h *harness, first *TokenResponse) error {
			return h.rf("other", first.RefreshToken, "")
		}, ErrInvalidGrant, true},
		{"empty token", func(h *harness, first *TokenResponse) error {
			return h.rf("app", "", "")
		}, ErrInvalidRequest, true},
		{"garbage", func(h *harness, first *TokenResponse) error {
			return h.rf("app", "not.a.jwt", "")
		}, ErrInvalidGrant, true},
		{"access token as refresh token", func(h *harness, first *TokenResponse) error {
			return h.rf("app", first.AccessToken, "")
		}, ErrInvalidGrant, true},
		{"ID token as refresh token", func(h *harness, first *TokenResponse) error {
			return h.rf("app", first.IDToken, "")
		}, ErrInvalidGrant, true},
		{"tampered token", func(h *harness, first *TokenResponse) error {
			return h.rf("app", first.RefreshToken[:len(first.RefreshToken)-4]+"AAAA", "")
		}, ErrInvalidGrant, true},
		{"widened scope", func(h *harness, first *TokenResponse) error {
			return h.rf("app", first.RefreshToken, "openid profile email")
		}, ErrInvalidScope, true},
		{"scope without openid, never granted", func(h *harness, first *TokenResponse) error {
			return h.rf("app", first.RefreshToken, "email") // narrowing may drop openid, never widen
		}, ErrInvalidScope, true},
		{"expired family", func(h *harness, first *TokenResponse) error {
			h.clock.Advance(refreshTTL + time.Minute)
			return h.rf("app", first.RefreshToken, "")
		}, ErrInvalidGrant, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			_, first := h.offline(t)
			wantError(t, tc.call(h, first), tc.code)
			err := h.rf("app", first.RefreshToken, "")
			if tc.usable && err != nil {
				t.Errorf("the refresh token no longer works after the refused request: %v", err)
			}
			if !tc.usable && err == nil {
				t.Error("the refresh token still works")
			}
		})
	}
}

func (h *harness) rf(client, token, scope string) error {
	_, err := h.svc.Refresh(context.Background(), client, token, scope)
	return err
}

func TestRefreshScopes(t *testing.T) {
	tests := []struct {
		name, scope, want string
	}{
		{"same scopes", "", "offline_access openid profile"},
		{"narrowed to openid", "openid", "openid"},
		{"narrowed, out of order and repeated", "profile openid profile", "openid profile"},
		{"all granted scopes asked", "profile offline_access openid", "offline_access openid profile"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			_, first := h.offline(t)
			resp := h.refresh(t, "app", first.RefreshToken, tc.scope)
			if resp.Scope != tc.want {
				t.Errorf("scope = %q, want %q", resp.Scope, tc.want)
			}
			ac, err := h.svc.VerifyAccessToken(context.Background(), resp.AccessToken)
			if err != nil || ac.Scope != tc.want {
				t.Errorf("access token scope = %+v, %v; want %q", ac, err, tc.want)
			}
			// Narrowing does not shrink the grant (RFC 6749 6): the next refresh,
			// asking nothing, gets every granted scope back.
			if resp.RefreshToken == "" {
				t.Fatal("no new refresh token")
			}
			if next := h.refresh(t, "app", resp.RefreshToken, ""); next.Scope != "offline_access openid profile" {
				t.Errorf("next refresh scope = %q, want the grant's", next.Scope)
			}
		})
	}
}
