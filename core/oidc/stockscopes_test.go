package oidc

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/core/keys"
)

// TestStockScopesGranted: the standard scopes (profile, email, address, phone) are
// granted to a client that is not configured for them, beside its own; the token
// response says what was granted; only profile adds a claim, a pseudonymous
// preferred_username that differs per sector; an API scope the client lacks is
// still invalid_scope (issue 21, item 1).
func TestStockScopesGranted(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	other := func(scope string) login {
		return h.login(t, params("client_id", "other", "redirect_uri", otherRedir, "scope", scope), "alice")
	}
	for _, tc := range []struct {
		name, scope, granted string
		username             bool
	}{
		{"Auth.js's default", "openid profile email", "email openid profile", true},
		{"oauth2-proxy's default", "openid email profile", "email openid profile", true},
		{"every standard scope and offline_access", "openid offline_access profile email address phone", "address email offline_access openid phone profile", true},
		{"email alone: no claim", "openid email", "email openid", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := other(tc.scope)
			resp, err := h.svc.ExchangeCode(ctx, "other", l.code, otherRedir, "")
			if err != nil {
				t.Fatalf("ExchangeCode: %v", err)
			}
			if resp.Scope != tc.granted {
				t.Errorf("token response scope %q, want %q", resp.Scope, tc.granted)
			}
			var id IDClaims
			h.parseToken(t, resp.IDToken, keys.RS256, &id)
			want := ""
			if tc.username {
				want = PreferredUsername(id.Subject)
			}
			if id.PreferredUsername != want {
				t.Errorf("ID token preferred_username %q, want %q", id.PreferredUsername, want)
			}
			var ac AccessClaims
			h.parseToken(t, resp.AccessToken, keys.ES256, &ac)
			if ac.Scope != tc.granted {
				t.Errorf("access token scope %q, want %q", ac.Scope, tc.granted)
			}
		})
	}
	t.Run("an API scope the client lacks is still invalid_scope", func(t *testing.T) {
		_, err := h.svc.Authorize(ctx, params("client_id", "other", "redirect_uri", otherRedir, "scope", "openid profile orders:read"), testBrowser)
		wantError(t, err, ErrInvalidScope)
	})
	t.Run("discovery lists the standard scopes and preferred_username", func(t *testing.T) {
		d := h.svc.Discovery()
		for _, sc := range StandardScopes {
			if !slices.Contains(d.ScopesSupported, sc) {
				t.Errorf("scopes_supported %v lacks %s", d.ScopesSupported, sc)
			}
		}
		if !slices.Contains(d.ClaimsSupported, "preferred_username") {
			t.Errorf("claims_supported %v lacks preferred_username", d.ClaimsSupported)
		}
	})
	t.Run("the login page names profile and is silent on the claimless ones", func(t *testing.T) {
		words := DescribeScopes([]string{ScopeOpenID, ScopeProfile, ScopeEmail, ScopeAddress, ScopePhone})
		if len(words) != 2 || !strings.Contains(words[1], "user name") {
			t.Errorf("DescribeScopes = %q, want the openid line and a user-name line", words)
		}
	})
}

// TestPreferredUsernamePseudonymous: the preferred_username is derived from the
// pairwise sub, so one person has different names in two sectors and the same name
// across logins, and it does not contain the sub.
func TestPreferredUsernamePseudonymous(t *testing.T) {
	h := newHarness(t)
	name := func(client, redirect string) (string, string) {
		l := h.login(t, params("client_id", client, "redirect_uri", redirect, "scope", "openid profile"), "bob")
		resp, err := h.svc.ExchangeCode(context.Background(), client, l.code, redirect, "")
		if err != nil {
			t.Fatalf("ExchangeCode: %v", err)
		}
		var id IDClaims
		h.parseToken(t, resp.IDToken, keys.RS256, &id)
		return id.Subject, id.PreferredUsername
	}
	subApp, inApp := name("app", appRedirect)
	_, again := name("app", appRedirect)
	subOther, inOther := name("other", otherRedir)
	if !strings.HasPrefix(inApp, "user-") || len(inApp) != len("user-")+preferredUsernameLen {
		t.Fatalf("preferred_username %q, want user- and %d hex digits", inApp, preferredUsernameLen)
	}
	if inApp != again {
		t.Errorf("preferred_username changed across logins: %q then %q", inApp, again)
	}
	if inApp == inOther || subApp == subOther {
		t.Errorf("one person has the same name %q in two sectors", inApp)
	}
	if strings.Contains(subApp, strings.TrimPrefix(inApp, "user-")) {
		t.Errorf("preferred_username %q is a piece of the sub %q", inApp, subApp)
	}
}

// TestRefreshNarrowedWithoutOpenID: a refresh may narrow the scopes to a subset
// without openid (RFC 6749 6): the answer is an access token with those scopes and
// a rotated refresh token, and no ID token; the grant keeps its scopes, so the next
// refresh without scope gets openid and an ID token again (issue 21, item 3).
func TestRefreshNarrowedWithoutOpenID(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	resp := h.exchange(t, h.login(t, params("scope", "openid offline_access profile"), "alice"), "")
	narrowed, err := h.svc.Refresh(ctx, "app", resp.RefreshToken, "offline_access profile")
	if err != nil {
		t.Fatalf("Refresh narrowed to offline_access profile: %v", err)
	}
	if narrowed.IDToken != "" {
		t.Errorf("a refresh without openid returned an ID token")
	}
	if narrowed.Scope != "offline_access profile" || narrowed.AccessToken == "" {
		t.Errorf("narrowed refresh: scope %q, access token %t; want offline_access profile and a token", narrowed.Scope, narrowed.AccessToken != "")
	}
	var ac AccessClaims
	h.parseToken(t, narrowed.AccessToken, keys.ES256, &ac)
	if ac.Scope != "offline_access profile" {
		t.Errorf("access token scope %q", ac.Scope)
	}
	if narrowed.RefreshToken == "" || narrowed.RefreshToken == resp.RefreshToken {
		t.Fatalf("the refresh token was not rotated")
	}
	if _, err := h.svc.Refresh(ctx, "app", narrowed.RefreshToken, "openid admin"); err == nil {
		t.Fatal("a refresh widened to a scope never granted was accepted")
	} else {
		wantError(t, err, ErrInvalidScope)
	}
	if _, err := h.svc.Refresh(ctx, "app", narrowed.RefreshToken, "   "); err == nil {
		t.Fatal("a refresh with an empty scope was accepted")
	} else {
		wantError(t, err, ErrInvalidScope)
	}
	full, err := h.svc.Refresh(ctx, "app", narrowed.RefreshToken, "")
	if err != nil {
		t.Fatalf("Refresh without scope after the refusals: %v", err)
	}
	if full.IDToken == "" || full.Scope != "offline_access openid profile" {
		t.Errorf("refresh without scope: ID token %t, scope %q; want an ID token and the grant's scopes", full.IDToken != "", full.Scope)
	}
}
