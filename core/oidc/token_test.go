package oidc

import (
	"context"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/palmgate/palmgate/core/keys"
)

func TestLoginFlow(t *testing.T) {
	tests := []struct {
		name        string
		params      url.Values
		verifier    string
		wantScope   string
		wantRefresh bool
		sector      string
	}{
		{"offline access with PKCE", params("scope", "openid offline_access", "code_challenge", pkceChallengeB, "code_challenge_method", "S256"), pkceVerifierB, "offline_access openid", true, "app"},
		{"openid only", params(), "", "openid", false, "app"},
		{"extra scopes, no nonce", params("scope", "openid profile", "nonce", ""), "", "openid profile", false, "app"},
		{"client with a sector", params("client_id", "other", "redirect_uri", otherRedir, "scope", "openid offline_access"), "", "offline_access openid", true, sharedSector},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			ctx := context.Background()
			ar := h.authorize(t, tc.params)
			h.clock.Advance(time.Minute)
			authTime := h.clock.Now()
			humanID := h.scan(t, ar, "alice")
			if _, err := uuid.Parse(humanID); err != nil {
				t.Fatalf("humanId %q", humanID)
			}
			st, err := h.svc.Login(ctx, ar.ID, testBinding, true)
			if err != nil || st.Request.Status != RequestVerified || st.Request.HumanID != humanID || !st.Request.AuthTime.Equal(authTime) {
				t.Fatalf("request after scan = %+v, %v", st.Request, err)
			}

			h.clock.Advance(10 * time.Second)
			r, err := h.svc.Finish(ctx, ar.ID, testBinding)
			if err != nil || r == nil || r.Code == "" || r.Error != "" || r.State != ar.State || r.URI != ar.RedirectURI {
				t.Fatalf("Finish = %+v, %v", r, err)
			}
			if len(r.Code) < 43 {
				t.Errorf("code %q is shorter than 256 bits", r.Code)
			}
			if again, err := h.svc.Finish(ctx, ar.ID, testBinding); again != nil || err == nil {
				t.Errorf("second Finish = %+v, %v; want an error", again, err)
			}

			h.clock.Advance(10 * time.Second)
			now := h.clock.Now()
			resp, err := h.svc.ExchangeCode(ctx, ar.ClientID, r.Code, ar.RedirectURI, tc.verifier)
			if err != nil {
				t.Fatalf("ExchangeCode: %v", err)
			}
			if resp.TokenType != "Bearer" || resp.ExpiresIn != int64(accessTTL/time.Second) || resp.Scope != tc.wantScope {
				t.Errorf("response = %+v", resp)
			}
			sub := PairwiseSubject([]byte(testSecret), tc.sector, humanID)

			var ac AccessClaims
			header := h.parseToken(t, resp.AccessToken, keys.ES256, &ac)
			if header["typ"] != TypeAccessToken || header["kid"] != h.keys.Active(keys.ES256).ID {
				t.Errorf("access token header = %v", header)
			}
			if ac.Issuer != oauthIssuer || ac.Subject != sub || !slices.Equal(ac.Audience, jwt.ClaimStrings{testIssuer}) ||
				ac.ClientID != ar.ClientID || ac.Scope != tc.wantScope || ac.GrantID == "" || ac.ID == "" ||
				ac.AuthTime != authTime.Unix() || !ac.IssuedAt.Equal(now) || !ac.ExpiresAt.Equal(now.Add(accessTTL)) {
				t.Errorf("access claims = %+v, want sub %s", ac, sub)
			}

			var ic IDClaims
			header = h.parseToken(t, resp.IDToken, keys.RS256, &ic)
			if header["typ"] != TypeIDToken || header["kid"] != h.keys.Active(keys.RS256).ID {
				t.Errorf("ID token header = %v", header)
			}
			if ic.Issuer != oauthIssuer || ic.Subject != sub || !slices.Equal(ic.Audience, jwt.ClaimStrings{ar.ClientID}) ||
				ic.Nonce != ar.Nonce || !slices.Equal(ic.AMR, []string{"palm"}) || ic.AuthTime != authTime.Unix() ||
				ic.GrantID != ac.GrantID || !ic.IssuedAt.Equal(now) || !ic.ExpiresAt.After(now) {
				t.Errorf("ID claims = %+v, want sub %s, nonce %q", ic, sub, ar.Nonce)
			}

			if tc.wantRefresh {
				if resp.RefreshToken == "" {
					t.Fatal("no refresh token with offline_access")
				}
				if d := resp.RefreshTokenExpiresIn - int64(refreshTTL/time.Second); d < -1 || d > 0 {
					t.Errorf("refresh_token_expires_in = %d, want %d", resp.RefreshTokenExpiresIn, int64(refreshTTL/time.Second))
				}
				var rc RefreshClaims
				header = h.parseToken(t, resp.RefreshToken, keys.ES256, &rc)
				if header["typ"] != TypeRefreshToken || rc.ClientID != ar.ClientID || rc.GrantID != ac.GrantID || rc.ID == "" ||
					!rc.ExpiresAt.Equal(now.Add(refreshTTL)) {
					t.Errorf("refresh token = %v %+v", header, rc)
				}
			} else if resp.RefreshToken != "" || resp.RefreshTokenExpiresIn != 0 {
				t.Errorf("refresh token without offline_access: %+v", resp)
			}

			got, err := h.svc.VerifyAccessToken(ctx, resp.AccessToken)
			if err != nil || got.Subject != sub || got.GrantID != ac.GrantID || !got.HasScopes("openid") || got.HasScopes("admin") {
				t.Errorf("VerifyAccessToken = %+v, %v", got, err)
			}

			// Code reuse is refused and revokes what the code gave.
			_, err = h.svc.ExchangeCode(ctx, ar.ClientID, r.Code, ar.RedirectURI, tc.verifier)
			wantError(t, err, ErrInvalidGrant)
			_, err = h.svc.VerifyAccessToken(ctx, resp.AccessToken)
			wantError(t, err, ErrInvalidToken)
			if tc.wantRefresh {
				_, err = h.svc.Refresh(ctx, ar.ClientID, resp.RefreshToken, "")
				wantError(t, err, ErrInvalidGrant)
			}
		})
	}
}

// TestSubjectsAcrossClients checks that one person has one stable subject per sector.
func TestSubjectsAcrossClients(t *testing.T) {
	h := newHarness(t)
	subOf := func(client, redirect, who string) (string, string) {
		t.Helper()
		l := h.login(t, params("client_id", client, "redirect_uri", redirect), who)
		var c AccessClaims
		h.parseToken(t, h.exchange(t, l, "").AccessToken, keys.ES256, &c)
		return c.Subject, l.humanID
	}
	app1, alice := subOf("app", appRedirect, "alice")
	app2, alice2 := subOf("app", appRedirect, "alice")
	other, _ := subOf("other", otherRedir, "alice")
	third, _ := subOf("third", "https://third.example.test/cb", "alice")
	bob, bobID := subOf("app", appRedirect, "bob")
	tests := []struct {
		name string
		ok   bool
	}{
		{"same human across logins", alice == alice2 && app1 == app2},
		{"subject is the pairwise one", app1 == PairwiseSubject([]byte(testSecret), "app", alice)},
		{"clients of one sector share it", other == third && other == PairwiseSubject([]byte(testSecret), sharedSector, alice)},
		{"sectors differ", app1 != other},
		{"humans differ", bobID != alice && bob != app1},
	}
	for _, tc := range tests {
		if !tc.ok {
			t.Errorf("%s: app %s %s, other %s, third %s, bob %s", tc.name, app1, app2, other, third, bob)
		}
	}
}

func TestExchangeCodeRefused(t *testing.T) {
	withPKCE := params("code_challenge", pkceChallengeB, "code_challenge_method", "S256")
	tests := []struct {
		name   string
		params url.Values
		// call exchanges l's code with a fault (after advancing the clock as needed).
		call func(h *harness, l login) error
		code string
		// usable reports whether the code still works afterwards.
		usable   bool
		verifier string
	}{
		{"wrong verifier", withPKCE, func(h *harness, l login) error {
			return h.ex("app", l.code, appRedirect, pkceVerifierB[:42]+"x")
		}, ErrInvalidGrant, true, pkceVerifierB},
		{"missing verifier", withPKCE, func(h *harness, l login) error {
			return h.ex("app", l.code, appRedirect, "")
		}, ErrInvalidGrant, true, pkceVerifierB},
		{"verifier is the challenge", withPKCE, func(h *harness, l login) error {
			return h.ex("app", l.code, appRedirect, pkceChallengeB)
		}, ErrInvalidGrant, true, pkceVerifierB},
		{"verifier too short", withPKCE, func(h *harness, l login) error {
			return h.ex("app", l.code, appRedirect, pkceVerifierB[:42])
		}, ErrInvalidRequest, true, pkceVerifierB},
		{"verifier without challenge", params(), func(h *harness, l login) error {
			return h.ex("app", l.code, appRedirect, pkceVerifierB)
		}, ErrInvalidGrant, true, ""},
		{"redirect_uri mismatch", params(), func(h *harness, l login) error {
			return h.ex("app", l.code, appLoopback, "")
		}, ErrInvalidGrant, true, ""},
		{"redirect_uri with trailing slash", params(), func(h *harness, l login) error {
			return h.ex("app", l.code, appRedirect+"/", "")
		}, ErrInvalidGrant, true, ""},
		{"no redirect_uri", params(), func(h *harness, l login) error {
			return h.ex("app", l.code, "", "")
		}, ErrInvalidRequest, true, ""},
		{"code of another client", params(), func(h *harness, l login) error {
			return h.ex("other", l.code, appRedirect, "")
		}, ErrInvalidGrant, true, ""},
		{"unknown code", params(), func(h *harness, l login) error {
			return h.ex("app", l.code+"x", appRedirect, "")
		}, ErrInvalidGrant, true, ""},
		{"empty code", params(), func(h *harness, l login) error {
			return h.ex("app", "", appRedirect, "")
		}, ErrInvalidRequest, true, ""},
		{"code at its expiry", params(), func(h *harness, l login) error {
			h.clock.Advance(codeTTL)
			return h.ex("app", l.code, appRedirect, "")
		}, ErrInvalidGrant, false, ""},
		{"expired code", params(), func(h *harness, l login) error {
			h.clock.Advance(codeTTL + time.Minute)
			return h.ex("app", l.code, appRedirect, "")
		}, ErrInvalidGrant, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			l := h.login(t, tc.params, "alice")
			wantError(t, tc.call(h, l), tc.code)
			if n := h.count(t, "oidc/grant/"); n != 0 {
				t.Errorf("a refused exchange stored %d grants", n)
			}
			err := h.ex("app", l.code, appRedirect, tc.verifier)
			if tc.usable && err != nil {
				t.Errorf("the right exchange after the refused one: %v", err)
			}
			if !tc.usable && err == nil {
				t.Error("the code still works")
			}
		})
	}
	t.Run("code just before expiry", func(t *testing.T) {
		h := newHarness(t)
		l := h.login(t, params(), "alice")
		h.clock.Advance(codeTTL - time.Second)
		if err := h.ex("app", l.code, appRedirect, ""); err != nil {
			t.Errorf("ExchangeCode: %v", err)
		}
	})
}

func (h *harness) ex(client, code, redirect, verifier string) error {
	_, err := h.svc.ExchangeCode(context.Background(), client, code, redirect, verifier)
	return err
}

// TestCodeReuseRevokes checks RFC 6749 4.1.2: a second use of a code by its client
// revokes the tokens issued from it.
func TestCodeReuseRevokes(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	l := h.login(t, params("scope", "openid offline_access"), "alice")
	first := h.exchange(t, l, "")
	refreshed, err := h.svc.Refresh(ctx, "app", first.RefreshToken, "")
	if err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	err = h.ex("app", l.code, appRedirect, "")
	wantError(t, err, ErrInvalidGrant)
	for name, tok := range map[string]string{"first": first.AccessToken, "refreshed": refreshed.AccessToken} {
		_, err := h.svc.VerifyAccessToken(ctx, tok)
		if err == nil {
			t.Errorf("%s access token still verifies", name)
		}
	}
	_, err = h.svc.Refresh(ctx, "app", refreshed.RefreshToken, "")
	wantError(t, err, ErrInvalidGrant)
}

// TestUsedCodeOfAnotherClientRevokesNothing: client B presenting client A's used
// code is invalid_grant and must not revoke A's grant (issue 9, finding 8: reuse was
// checked before the client binding, so any client could revoke any grant).
func TestUsedCodeOfAnotherClientRevokesNothing(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	l := h.login(t, params("scope", "openid offline_access"), "alice")
	first := h.exchange(t, l, "")
	for _, redirect := range []string{otherRedir, appRedirect} {
		err := h.ex("other", l.code, redirect, "")
		wantError(t, err, ErrInvalidGrant)
	}
	if _, err := h.svc.VerifyAccessToken(ctx, first.AccessToken); err != nil {
		t.Errorf("A's access token refused after B presented the code: %v", err)
	}
	if _, err := h.svc.Refresh(ctx, "app", first.RefreshToken, ""); err != nil {
		t.Errorf("A's refresh token refused after B presented the code: %v", err)
	}
	if n := h.count(t, "oidc/revoked/"); n != 0 {
		t.Errorf("%d revocation records, want none", n)
	}
}
