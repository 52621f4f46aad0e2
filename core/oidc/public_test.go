package oidc

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// The public client of testClients, and the origins it allows.
const (
	spaRedirect    = "https://spa.example.test:8443/callback"
	spaOrigin      = "https://spa.example.test:8443"
	spaExtraOrigin = "https://extra.example.test"
	spaVerifier    = "spa-code-verifier-of-at-least-43-characters-0123456789"
)

func spaChallenge() string {
	sum := sha256.Sum256([]byte(spaVerifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// spaParams is an authorization request of the public client, with PKCE.
func spaParams(kv ...string) url.Values {
	p := params("client_id", "spa", "redirect_uri", spaRedirect, "scope", "openid offline_access",
		"code_challenge", spaChallenge(), "code_challenge_method", "S256")
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			p.Del(kv[i])
		} else {
			p.Set(kv[i], kv[i+1])
		}
	}
	return p
}

// token calls the token endpoint's entry point with a form (client_id and, when
// given, client_secret in it).
func (h *harness) token(form ...string) (*TokenResponse, error) {
	v := url.Values{}
	for i := 0; i+1 < len(form); i += 2 {
		v.Set(form[i], form[i+1])
	}
	return h.svc.Token(context.Background(), ClientRequest{Params: v})
}

// TestPublicClientFlow: a public client logs in with PKCE and no secret, refreshes
// (rotation), and a reused refresh token revokes the family.
func TestPublicClientFlow(t *testing.T) {
	h := newHarness(t)
	l := h.login(t, spaParams(), "alice")
	resp, err := h.token("grant_type", "authorization_code", "client_id", "spa", "code", l.code,
		"redirect_uri", spaRedirect, "code_verifier", spaVerifier)
	if err != nil {
		t.Fatalf("code exchange without a secret: %v", err)
	}
	if resp.AccessToken == "" || resp.IDToken == "" || resp.RefreshToken == "" {
		t.Fatalf("token response lacks a token: %+v", resp)
	}
	next, err := h.token("grant_type", "refresh_token", "client_id", "spa", "refresh_token", resp.RefreshToken)
	if err != nil {
		t.Fatalf("refresh without a secret: %v", err)
	}
	if next.RefreshToken == "" || next.RefreshToken == resp.RefreshToken {
		t.Fatal("the refresh token did not rotate")
	}
	// The rotated-out token used again: refused, and the family is revoked.
	_, err = h.token("grant_type", "refresh_token", "client_id", "spa", "refresh_token", resp.RefreshToken)
	wantError(t, err, ErrInvalidGrant)
	_, err = h.token("grant_type", "refresh_token", "client_id", "spa", "refresh_token", next.RefreshToken)
	wantError(t, err, ErrInvalidGrant)
}

// TestPublicClientRefusals: the rules that make a client public.
func TestPublicClientRefusals(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	t.Run("authorize without PKCE goes back invalid_request", func(t *testing.T) {
		_, err := h.svc.Authorize(ctx, spaParams("code_challenge", "", "code_challenge_method", ""), testBrowser)
		oe := wantError(t, err, ErrInvalidRequest)
		if oe.RedirectURI != spaRedirect || !strings.Contains(oe.Description, "PKCE") {
			t.Errorf("refusal = %+v, want it sent back to the redirect_uri, naming PKCE", oe)
		}
	})
	t.Run("a secret presented is refused", func(t *testing.T) {
		l := h.login(t, spaParams(), "alice")
		_, err := h.token("grant_type", "authorization_code", "client_id", "spa", "client_secret", "anything",
			"code", l.code, "redirect_uri", spaRedirect, "code_verifier", spaVerifier)
		wantError(t, err, ErrInvalidClient)
		// Nothing was spent: the code still works without the secret.
		if _, err := h.token("grant_type", "authorization_code", "client_id", "spa", "code", l.code,
			"redirect_uri", spaRedirect, "code_verifier", spaVerifier); err != nil {
			t.Fatalf("the code after a refused attempt: %v", err)
		}
	})
	t.Run("without the verifier", func(t *testing.T) {
		l := h.login(t, spaParams(), "alice")
		_, err := h.token("grant_type", "authorization_code", "client_id", "spa", "code", l.code, "redirect_uri", spaRedirect)
		wantError(t, err, ErrInvalidGrant)
	})
	t.Run("a confidential client still authenticates", func(t *testing.T) {
		l := h.login(t, params(), "alice")
		_, err := h.token("grant_type", "authorization_code", "client_id", "app", "code", l.code, "redirect_uri", appRedirect)
		wantError(t, err, ErrInvalidClient)
	})
	t.Run("introspection refused, revocation allowed", func(t *testing.T) {
		l := h.login(t, spaParams(), "alice")
		resp, err := h.token("grant_type", "authorization_code", "client_id", "spa", "code", l.code,
			"redirect_uri", spaRedirect, "code_verifier", spaVerifier)
		if err != nil {
			t.Fatal(err)
		}
		req := ClientRequest{Params: url.Values{"client_id": {"spa"}, "token": {resp.AccessToken}}}
		_, err = h.svc.Authenticate(ctx, req)
		wantError(t, err, ErrInvalidClient)
		id, err := h.svc.AuthenticateRevoker(ctx, req)
		if err != nil || id != "spa" {
			t.Fatalf("AuthenticateRevoker = %q, %v; want spa", id, err)
		}
		req.Params.Set("client_secret", "x")
		_, err = h.svc.AuthenticateRevoker(ctx, req)
		wantError(t, err, ErrInvalidClient)
		if err := h.svc.Revoke(ctx, id, resp.RefreshToken); err != nil {
			t.Fatalf("Revoke: %v", err)
		}
		_, err = h.token("grant_type", "refresh_token", "client_id", "spa", "refresh_token", resp.RefreshToken)
		wantError(t, err, ErrInvalidGrant)
	})
	t.Run("discovery lists none", func(t *testing.T) {
		d := h.svc.Discovery()
		if !slices.Contains(d.TokenEndpointAuthMethodsSupported, "none") || !slices.Contains(d.RevocationEndpointAuthMethodsSupported, "none") {
			t.Errorf("auth methods = %v / %v, want none listed", d.TokenEndpointAuthMethodsSupported, d.RevocationEndpointAuthMethodsSupported)
		}
		if slices.Contains(d.IntrospectionEndpointAuthMethodsSupported, "none") {
			t.Error("introspection lists none")
		}
	})
}

// TestClientOrigins: a client's allowed origins (CORS), static and dynamic, and
// their union.
func TestClientOrigins(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	reg := h.svc.Clients()
	for _, c := range []struct {
		client, origin string
		want           bool
	}{
		{"spa", spaOrigin, true},                   // its redirect URI's origin
		{"spa", spaExtraOrigin, true},              // allowed_origins
		{"spa", "https://spa.example.test", false}, // another port
		{"spa", "https://evil.example.test", false},
		{"spa", "null", false},
		{"app", "https://app.example.test", false}, // a confidential client: only configured origins
		{"nobody", spaOrigin, false},
	} {
		got, err := reg.ClientOriginAllowed(ctx, c.client, c.origin)
		if err != nil || got != c.want {
			t.Errorf("ClientOriginAllowed(%s, %s) = %v, %v; want %v", c.client, c.origin, got, err, c.want)
		}
	}
	union := func(origin string) bool {
		t.Helper()
		ok, err := reg.OriginAllowed(ctx, origin)
		if err != nil {
			t.Fatalf("OriginAllowed: %v", err)
		}
		return ok
	}
	if !union(spaOrigin) || !union(spaExtraOrigin) || union("https://evil.example.test") || union("*") {
		t.Error("the static union is wrong")
	}
	// A dynamic public client: no secret, its origins indexed until it changes or goes.
	ci, secret, err := reg.Create(ctx, ClientSpec{Name: ptr("Dyn SPA"), RedirectURIs: []string{"https://dyn.example.test/cb"},
		Public: true, AllowedOrigins: []string{"HTTPS://Also.Example.test:443"}})
	if err != nil {
		t.Fatalf("Create public: %v", err)
	}
	if secret != "" || ci.TokenEndpointAuthMethod != "none" {
		t.Fatalf("public client created with secret %q, method %q", secret, ci.TokenEndpointAuthMethod)
	}
	if !slices.Equal(ci.AllowedOrigins, []string{"https://also.example.test", "https://dyn.example.test"}) {
		t.Errorf("AllowedOrigins = %v", ci.AllowedOrigins)
	}
	if !union("https://dyn.example.test") || !union("https://also.example.test") {
		t.Error("the dynamic client's origins are not in the union")
	}
	if _, _, err := reg.RotateSecret(ctx, ci.ID, "", 0); !errors.Is(err, ErrClientInvalid) {
		t.Errorf("RotateSecret of a public client = %v, want ErrClientInvalid", err)
	}
	if _, err := reg.Update(ctx, ci.ID, "", ClientSpec{AllowedOrigins: []string{}}); err != nil {
		t.Fatal(err)
	}
	if union("https://also.example.test") || !union("https://dyn.example.test") {
		t.Error("an origin removed by an update is still allowed, or the redirect URI's went")
	}
	// Its login needs no secret, as a static public client's.
	l := h.login(t, params("client_id", ci.ID, "redirect_uri", "https://dyn.example.test/cb",
		"code_challenge", spaChallenge(), "code_challenge_method", "S256"), "bob")
	if _, err := h.token("grant_type", "authorization_code", "client_id", ci.ID, "code", l.code,
		"redirect_uri", "https://dyn.example.test/cb", "code_verifier", spaVerifier); err != nil {
		t.Fatalf("dynamic public client's exchange: %v", err)
	}
	if err := reg.Delete(ctx, ci.ID, ""); err != nil {
		t.Fatal(err)
	}
	if union("https://dyn.example.test") || h.count(t, "oidc/cors-origin/") != 0 {
		t.Error("a deleted client's origins remain")
	}
	for _, bad := range [][]string{{"*"}, {"null"}, {"https://a.example.test/path"}, {"http://a.example.test"}, {"ftp://a"}} {
		if _, _, err := reg.Create(ctx, ClientSpec{Name: ptr("Bad"), RedirectURIs: []string{appRedirect}, AllowedOrigins: bad}); !errors.Is(err, ErrClientInvalid) {
			t.Errorf("allowed origins %q: err = %v, want ErrClientInvalid", bad, err)
		}
	}
}

// TestCheckPublicClients: the config rules of public clients.
func TestCheckPublicClients(t *testing.T) {
	for name, c := range map[string]Client{
		"public with a secret":      {ID: "x", Public: true, Secret: "s", RedirectURIs: []string{appRedirect}},
		"public with a secret hash": {ID: "x", Public: true, SecretHash: "sha256:" + strings.Repeat("0", 64), RedirectURIs: []string{appRedirect}},
		"wildcard origin":           {ID: "x", Public: true, AllowedOrigins: []string{"*"}},
		"origin with a path":        {ID: "x", Secret: "s", AllowedOrigins: []string{"https://a.example.test/app"}},
	} {
		if err := CheckClients([]Client{c}, false); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := CheckClients([]Client{{ID: "x", Public: true, RedirectURIs: []string{appRedirect}, AllowedOrigins: []string{"http://localhost:5173"}}}, false); err != nil {
		t.Errorf("a valid public client: %v", err)
	}
}
