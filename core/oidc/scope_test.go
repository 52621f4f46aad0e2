package oidc

import (
	"context"
	"net/url"
	"slices"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/core/keys"
)

// TestAuthorizeScopesOfClient: a client gets only the scopes its configuration
// allows, openid and offline_access by default (issue 9, finding 5).
func TestAuthorizeScopesOfClient(t *testing.T) {
	h := newHarness(t)
	other := func(kv ...string) url.Values {
		return params(append([]string{"client_id", "other", "redirect_uri", otherRedir}, kv...)...)
	}
	for _, tc := range []struct {
		name   string
		params url.Values
		want   string // error code, "" for accepted
	}{
		{"default scopes", other("scope", "openid offline_access"), ""},
		{"default client asks admin", other("scope", "openid orders:read orders:write admin"), ErrInvalidScope},
		{"default client asks profile (a standard scope)", other("scope", "openid profile"), ""},
		{"configured scope", params("scope", "openid profile"), ""},
		{"scope beyond the configured ones", params("scope", "openid profile admin"), ErrInvalidScope},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ar, err := h.svc.Authorize(context.Background(), tc.params, testBrowser)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Authorize: %v", err)
				}
				return
			}
			if ar != nil {
				t.Errorf("Authorize accepted %v", ar.Scopes)
			}
			wantError(t, err, tc.want)
		})
	}
}

// accessAudience returns the aud of an access token.
func (h *harness) accessAudience(t *testing.T, token string) jwt.ClaimStrings {
	t.Helper()
	var ac AccessClaims
	h.parseToken(t, token, keys.ES256, &ac)
	return ac.Audience
}

// TestResourceAudience: RFC 8707 `resource` makes the access token's aud, at
// authorize and at the token endpoint, and refreshed tokens keep it.
func TestResourceAudience(t *testing.T) {
	ctx := context.Background()
	t.Run("no resource: aud is the issuer's base URL", func(t *testing.T) {
		h := newHarness(t)
		resp := h.exchange(t, h.login(t, params(), "alice"), "")
		if aud := h.accessAudience(t, resp.AccessToken); !slices.Equal(aud, jwt.ClaimStrings{testIssuer}) {
			t.Errorf("aud %v, want [%s]", aud, testIssuer)
		}
	})
	t.Run("resource becomes aud, and stays across refresh", func(t *testing.T) {
		h := newHarness(t)
		l := h.login(t, params("scope", "openid offline_access", "resource", apiResource), "alice")
		if l.ar.Resource != apiResource {
			t.Fatalf("request resource %q", l.ar.Resource)
		}
		// A token request for another resource is refused and leaves the code usable.
		_, err := h.svc.ExchangeCode(ctx, "app", l.code, appRedirect, "", otherAPIResource)
		wantError(t, err, ErrInvalidTarget)
		resp, err := h.svc.ExchangeCode(ctx, "app", l.code, appRedirect, "", apiResource)
		if err != nil {
			t.Fatalf("ExchangeCode with the granted resource: %v", err)
		}
		if aud := h.accessAudience(t, resp.AccessToken); !slices.Equal(aud, jwt.ClaimStrings{apiResource}) {
			t.Errorf("aud %v, want [%s]", aud, apiResource)
		}
		_, err = h.svc.Refresh(ctx, "app", resp.RefreshToken, "", otherAPIResource)
		wantError(t, err, ErrInvalidTarget)
		refreshed, err := h.svc.Refresh(ctx, "app", resp.RefreshToken, "")
		if err != nil {
			t.Fatalf("Refresh after a refused one: %v", err)
		}
		if aud := h.accessAudience(t, refreshed.AccessToken); !slices.Equal(aud, jwt.ClaimStrings{apiResource}) {
			t.Errorf("refreshed aud %v, want [%s]", aud, apiResource)
		}
		again, err := h.svc.Refresh(ctx, "app", refreshed.RefreshToken, "", apiResource)
		if err != nil {
			t.Fatalf("Refresh naming the granted resource: %v", err)
		}
		if aud := h.accessAudience(t, again.AccessToken); !slices.Equal(aud, jwt.ClaimStrings{apiResource}) {
			t.Errorf("refreshed aud %v, want [%s]", aud, apiResource)
		}
	})
	t.Run("token request cannot add a resource the authorization did not grant", func(t *testing.T) {
		h := newHarness(t)
		l := h.login(t, params(), "alice")
		_, err := h.svc.ExchangeCode(ctx, "app", l.code, appRedirect, "", apiResource)
		wantError(t, err, ErrInvalidTarget)
		_, err = h.svc.ExchangeCode(ctx, "app", l.code, appRedirect, "", apiResource, otherAPIResource)
		wantError(t, err, ErrInvalidTarget)
		if resp := h.exchange(t, l, ""); resp.AccessToken == "" {
			t.Fatal("no access token")
		}
	})
	t.Run("refused at authorize", func(t *testing.T) {
		h := newHarness(t)
		two := params()
		two["resource"] = []string{apiResource, otherAPIResource}
		for name, p := range map[string]url.Values{
			"unlisted":              params("resource", "https://evil.example.test"),
			"listed for another":    params("client_id", "other", "redirect_uri", otherRedir, "resource", apiResource),
			"prefix of a listed":    params("resource", "https://api.example.test/admin"),
			"relative":              params("resource", "/api"),
			"with a fragment":       params("resource", apiResource+"#x"),
			"two resources":         two,
			"listed, but scope bad": params("resource", apiResource, "scope", "openid admin"),
		} {
			t.Run(name, func(t *testing.T) {
				before := h.count(t, "oidc/ar/")
				ar, err := h.svc.Authorize(ctx, p, testBrowser)
				want := ErrInvalidTarget
				if name == "listed, but scope bad" {
					want = ErrInvalidScope
				}
				wantError(t, err, want)
				if ar != nil || h.count(t, "oidc/ar/") != before {
					t.Errorf("refused request stored: %+v", ar)
				}
			})
		}
	})
}

func TestValidResource(t *testing.T) {
	for uri, want := range map[string]bool{
		"https://api.example.com":        true,
		"https://api.example.com/v1?x=1": true,
		"urn:example:orders":             true,
		"":                               false,
		"/relative":                      false,
		"api.example.com":                false,
		"https://api.example.com/#frag":  false,
		"https://api.example.com#":       false,
		"https://api.example.com/%zz":    false,
	} {
		if got := ValidResource(uri); got != want {
			t.Errorf("ValidResource(%q) = %v, want %v", uri, got, want)
		}
	}
}

// TestNarrowedClientRefusesGrant: a grant is re-checked against the client's
// current configuration when its code is exchanged and when it is refreshed, so
// that a reload narrowing a client's scopes or resources stops the old ones from
// being issued (invalid_scope, invalid_target) (issue 18, finding 11 a). The
// narrowed configuration is a second Service on the same store, as a reload
// builds one.
func TestNarrowedClientRefusesGrant(t *testing.T) {
	ctx := context.Background()
	app := testClients[0]
	// An API scope: the standard ones (profile...) are every client's.
	withoutOrders, withoutAPI := app, app
	withoutOrders.Scopes = []string{"openid", "offline_access", "profile"}
	withoutAPI.Resources = []string{otherAPIResource}
	asked := params("scope", "openid offline_access orders:read", "resource", apiResource)
	for _, tc := range []struct {
		name   string
		narrow Client
		want   string
	}{
		{"scope no longer allowed", withoutOrders, ErrInvalidScope},
		{"resource no longer allowed", withoutAPI, ErrInvalidTarget},
	} {
		t.Run(tc.name+": refresh", func(t *testing.T) {
			h := newHarness(t)
			resp := h.exchange(t, h.login(t, asked, "alice"), "")
			narrowed := h.reloaded(t, tc.narrow)
			_, err := narrowed.Refresh(ctx, "app", resp.RefreshToken, "")
			wantError(t, err, tc.want)
			// Asking for fewer scopes does not help: the grant is what is checked.
			_, err = narrowed.Refresh(ctx, "app", resp.RefreshToken, "openid")
			wantError(t, err, tc.want)
			// The refusal consumed nothing: the unchanged configuration still refreshes.
			if again := h.refresh(t, "app", resp.RefreshToken, ""); again.AccessToken == "" {
				t.Error("no access token from the unchanged configuration")
			}
		})
		t.Run(tc.name+": code exchange", func(t *testing.T) {
			h := newHarness(t)
			l := h.login(t, asked, "alice")
			_, err := h.reloaded(t, tc.narrow).ExchangeCode(ctx, "app", l.code, appRedirect, "")
			wantError(t, err, tc.want)
			if resp := h.exchange(t, l, ""); resp.AccessToken == "" {
				t.Error("no access token from the unchanged configuration")
			}
		})
	}
	t.Run("unchanged scopes and resource still refresh", func(t *testing.T) {
		h := newHarness(t)
		resp := h.exchange(t, h.login(t, asked, "alice"), "")
		if _, err := h.reloaded(t, app).Refresh(ctx, "app", resp.RefreshToken, ""); err != nil {
			t.Errorf("Refresh under an equal configuration: %v", err)
		}
	})
}

// reloaded is a second Service on h's store, keys and clock, whose client app is
// replaced by app: what a configuration reload builds.
func (h *harness) reloaded(t *testing.T, app Client) *Service {
	t.Helper()
	clients := slices.Clone(testClients)
	clients[0] = app
	svc, err := NewService(context.Background(), Config{
		Store: h.store, Palm: h.palm, Keys: h.keys, Now: h.clock.Now, Issuer: testIssuer,
		Clients: clients, PairwiseSecret: testSecret,
		AccessTTL: accessTTL, RefreshTTL: refreshTTL, CodeTTL: codeTTL, LoginTTL: loginTTL,
	})
	if err != nil {
		t.Fatalf("NewService with the narrowed client: %v", err)
	}
	return svc
}
