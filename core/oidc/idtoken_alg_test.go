package oidc

import (
	"context"
	"net/url"
	"slices"
	"testing"

	"github.com/palmgate/palmgate/core/keys"
)

// TestIDTokenAlgorithmPerClient: a client's ID tokens, from the code and from a
// refresh, are signed with the algorithm it picked (RS256 by default), by that
// algorithm's key only; access and refresh tokens stay ES256; discovery lists every
// algorithm; and an id_token_hint of each algorithm ends its login.
func TestIDTokenAlgorithmPerClient(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if got := h.svc.Discovery().IDTokenSigningAlgValuesSupported; !slices.Equal(got, []string{keys.RS256, keys.ES256, keys.EdDSA}) {
		t.Errorf("id_token_signing_alg_values_supported = %v, want RS256, ES256, EdDSA", got)
	}
	for _, tc := range []struct{ client, redirect, alg string }{
		{"app", appRedirect, keys.RS256},
		{"es-app", esRedirect, keys.ES256},
		{"ed-app", edRedirect, keys.EdDSA},
	} {
		t.Run(tc.client, func(t *testing.T) {
			l := h.login(t, params("client_id", tc.client, "redirect_uri", tc.redirect, "scope", "openid offline_access"), "alice")
			resp := h.exchange(t, l, "")
			var c IDClaims
			header := h.parseToken(t, resp.IDToken, tc.alg, &c)
			if header["alg"] != tc.alg || header["kid"] != h.keys.Active(tc.alg).ID || c.Audience[0] != tc.client || c.Nonce != "n-456" {
				t.Errorf("ID token header %v, aud %v, nonce %q; want alg %s by its active key, for %s", header, c.Audience, c.Nonce, tc.alg, tc.client)
			}
			var a AccessClaims
			if header := h.parseToken(t, resp.AccessToken, keys.ES256, &a); header["alg"] != keys.ES256 {
				t.Errorf("access token alg %v, want ES256", header["alg"])
			}
			refreshed, err := h.svc.Refresh(ctx, tc.client, resp.RefreshToken, "")
			if err != nil {
				t.Fatalf("Refresh: %v", err)
			}
			if header := h.parseToken(t, refreshed.IDToken, tc.alg, &IDClaims{}); header["alg"] != tc.alg {
				t.Errorf("refreshed ID token alg %v, want %s", header["alg"], tc.alg)
			}
			out, err := h.svc.EndSession(ctx, url.Values{"id_token_hint": {refreshed.IDToken}})
			if err != nil || out.ClientID != tc.client || out.GrantID != c.GrantID {
				t.Fatalf("EndSession with a %s hint = %+v, %v; want the login of %s ended", tc.alg, out, err, tc.client)
			}
			if _, err := h.svc.VerifyAccessToken(ctx, refreshed.AccessToken); err == nil {
				t.Error("the access token of a logged-out login still verifies")
			}
		})
	}
}

// TestCheckClientsIDTokenAlg: only the algorithms palmgate signs ID tokens with.
func TestCheckClientsIDTokenAlg(t *testing.T) {
	for _, alg := range []string{"", keys.RS256, keys.ES256, keys.EdDSA} {
		if err := CheckClients([]Client{{ID: "c", Secret: "s", IDTokenAlg: alg}}, false); err != nil {
			t.Errorf("IDTokenAlg %q refused: %v", alg, err)
		}
	}
	for _, alg := range []string{"HS256", "none", "RS512", "es256", "Ed25519"} {
		if err := CheckClients([]Client{{ID: "c", Secret: "s", IDTokenAlg: alg}}, false); err == nil {
			t.Errorf("IDTokenAlg %q accepted", alg)
		}
	}
}
