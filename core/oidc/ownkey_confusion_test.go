package oidc

import (
	"context"
	"crypto/fips140"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/storage/memstore"
)

// resign re-signs token's header and claims with header alg and kid changed,
// with method and key (the signature a forger would try).
func resign(t *testing.T, token, alg, kid string, method jwt.SigningMethod, key any) string {
	t.Helper()
	parts := strings.Split(token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	var header map[string]any
	if err := json.Unmarshal(raw, &header); err != nil {
		t.Fatal(err)
	}
	header["alg"], header["kid"] = alg, kid
	hb, _ := json.Marshal(header)
	signing := base64.RawURLEncoding.EncodeToString(hb) + "." + parts[1]
	if method == nil {
		return signing + "."
	}
	sig, err := method.Sign(signing, key)
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// TestOwnES256KeyAlgConfusion (2026-11-27): a token whose kid names palmgate's
// ES256 key but whose alg is RS256, EdDSA (signed with palmgate's own keys of
// those algorithms), HS256 (keyed with the ES256 public key's encodings) or none
// is refused everywhere palmgate verifies its own tokens, now that Set.Key hands
// out an OwnES256Key for that kid and KeyFunc switches the token's method.
func TestOwnES256KeyAlgConfusion(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	_, resp := h.offline(t)
	esLogin := h.exchange(t, h.login(t, params("client_id", "es-app", "redirect_uri", esRedirect,
		"scope", "openid offline_access"), "alice"), "")
	es := h.keys.Active(keys.ES256)
	der, err := x509.MarshalPKIXPublicKey(es.Public())
	if err != nil {
		t.Fatal(err)
	}
	forgeries := func(token string) map[string]string {
		return map[string]string{
			"RS256":                      resign(t, token, keys.RS256, es.ID, jwt.SigningMethodRS256, h.keys.Active(keys.RS256).Private),
			"EdDSA":                      resign(t, token, keys.EdDSA, es.ID, jwt.SigningMethodEdDSA, h.keys.Active(keys.EdDSA).Private),
			"HS256 with the SPKI":        resign(t, token, "HS256", es.ID, jwt.SigningMethodHS256, der),
			"HS256 with the SPKI in b64": resign(t, token, "HS256", es.ID, jwt.SigningMethodHS256, []byte(base64.StdEncoding.EncodeToString(der))),
			"none":                       resign(t, token, "none", es.ID, nil, nil),
			"ES256 of another kid":       resign(t, token, keys.ES256, h.keys.Active(keys.RS256).ID, jwt.SigningMethodES256, es.Private),
		}
	}
	for name, at := range forgeries(resp.AccessToken) {
		if _, err := h.svc.VerifyAccessToken(ctx, at); err == nil {
			t.Errorf("access token %s: verified", name)
		}
		if in, err := h.svc.Introspect(ctx, "app", at); err != nil || in.Active {
			t.Errorf("access token %s: Introspect = %+v, %v; want inactive", name, in, err)
		}
	}
	for name, rt := range forgeries(resp.RefreshToken) {
		if in, err := h.svc.Introspect(ctx, "app", rt); err != nil || in.Active {
			t.Errorf("refresh token %s: Introspect = %+v, %v; want inactive", name, in, err)
		}
		wantError(t, h.rf("app", rt, ""), ErrInvalidGrant)
	}
	for name, hint := range forgeries(esLogin.IDToken) {
		if _, err := h.svc.EndSession(ctx, url.Values{"id_token_hint": {hint}}); err == nil {
			t.Errorf("id_token_hint %s: accepted", name)
		}
	}
	// The tokens as issued still verify, through the shortcut.
	if _, err := h.svc.VerifyAccessToken(ctx, resp.AccessToken); err != nil {
		t.Fatalf("access token as issued: %v", err)
	}
	h.refresh(t, "app", resp.RefreshToken, "")
	if out, err := h.svc.EndSession(ctx, url.Values{"id_token_hint": {esLogin.IDToken}}); err != nil || out.GrantID == "" {
		t.Fatalf("ES256 id_token_hint as issued: %+v, %v", out, err)
	}
}

// TestOwnES256KeyOfAnotherInstance (2026-11-27): an ES256 key another instance
// rotated in is loaded by this one on the unknown kid (Reload, parseRecord) with
// its OwnES256Key, and verifies that instance's access and refresh tokens here,
// as the retired key still verifies the earlier ones.
func TestOwnES256KeyOfAnotherInstance(t *testing.T) {
	store := memstore.New()
	a := newHarnessOn(t, store, testSecret)
	b := newHarnessOn(t, store, testSecret)
	ctx := context.Background()
	_, before := a.offline(t)
	if _, err := b.keys.Rotate(ctx, keys.ES256); err != nil {
		t.Fatal(err)
	}
	_, after := b.offline(t)
	if a.keys.ByID(b.keys.Active(keys.ES256).ID) != nil {
		t.Fatal("instance a knew b's new key before any token named it")
	}
	for name, resp := range map[string]*TokenResponse{"before the rotation": before, "after it, by b": after} {
		k, alg, err := a.keys.Key(ctx, b.keys.Active(keys.ES256).ID)
		if _, own := k.(*keys.OwnES256Key); err != nil || alg != keys.ES256 || own == fips140.Enabled() {
			t.Fatalf("a.keys.Key(b's new key) = %T, %s, %v; want an OwnES256Key (the public key in FIPS 140-3 mode)", k, alg, err)
		}
		if _, err := a.svc.VerifyAccessToken(ctx, resp.AccessToken); err != nil {
			t.Errorf("access token %s: %v", name, err)
		}
		if in, err := a.svc.Introspect(ctx, "app", resp.RefreshToken); err != nil || !in.Active {
			t.Errorf("refresh token %s: Introspect = %+v, %v; want active", name, in, err)
		}
		a.refresh(t, "app", resp.RefreshToken, "")
	}
}
