package oidc

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// TestAccessTokenAudiencePerClient: a client's access_token_audience sets the aud
// of its access tokens without a resource (the base URL by default, the client_id,
// or both), from the code and from a refresh; a granted resource is the aud alone
// whatever the choice (issue 21, item 2).
func TestAccessTokenAudiencePerClient(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		choice       string
		want         jwt.ClaimStrings
		withResource jwt.ClaimStrings
	}{
		{"", jwt.ClaimStrings{testIssuer}, jwt.ClaimStrings{apiResource}},
		{AudienceBaseURL, jwt.ClaimStrings{testIssuer}, jwt.ClaimStrings{apiResource}},
		{AudienceClientID, jwt.ClaimStrings{"app"}, jwt.ClaimStrings{apiResource}},
		{AudienceBoth, jwt.ClaimStrings{testIssuer, "app"}, jwt.ClaimStrings{apiResource}},
	} {
		t.Run("choice "+tc.choice, func(t *testing.T) {
			h := newHarness(t)
			app := testClients[0]
			app.AccessTokenAudience = tc.choice
			h.svc = h.reloaded(t, app)
			resp := h.exchange(t, h.login(t, params("scope", "openid offline_access"), "alice"), "")
			if aud := h.accessAudience(t, resp.AccessToken); !slices.Equal(aud, tc.want) {
				t.Errorf("aud %v, want %v", aud, tc.want)
			}
			next := h.refresh(t, "app", resp.RefreshToken, "")
			if aud := h.accessAudience(t, next.AccessToken); !slices.Equal(aud, tc.want) {
				t.Errorf("aud after refresh %v, want %v", aud, tc.want)
			}
			withRes := h.exchange(t, h.login(t, params("resource", apiResource), "alice"), "")
			if aud := h.accessAudience(t, withRes.AccessToken); !slices.Equal(aud, tc.withResource) {
				t.Errorf("aud with a resource %v, want %v", aud, tc.withResource)
			}
			// palmgate's own verifier (userinfo, palmgate_bearer) takes each.
			if _, err := h.svc.AccessVerifier().Verify(ctx, resp.AccessToken); err != nil {
				t.Errorf("the access verifier refused the token: %v", err)
			}
		})
	}
}

// TestAccessTokenAudienceChecked: an unknown access_token_audience is refused in
// the configuration (CheckClients) and in the admin API's create and update; a
// dynamic client's choice is kept and shown.
func TestAccessTokenAudienceChecked(t *testing.T) {
	for _, v := range AccessTokenAudiences {
		if err := CheckClients([]Client{{ID: "c", Secret: "s", AccessTokenAudience: v}}, false); err != nil {
			t.Errorf("access_token_audience %q refused: %v", v, err)
		}
	}
	for _, v := range []string{"issuer", "CLIENT_ID", "https://api.example"} {
		if err := CheckClients([]Client{{ID: "c", Secret: "s", AccessTokenAudience: v}}, false); err == nil {
			t.Errorf("access_token_audience %q accepted", v)
		}
	}
	ctx := context.Background()
	h := newHarness(t)
	bad := "audience"
	if _, _, err := h.svc.Clients().Create(ctx, ClientSpec{Name: ptr("a"), RedirectURIs: []string{appRedirect}, AccessTokenAudience: &bad}); !errors.Is(err, ErrClientInvalid) {
		t.Errorf("Create with access_token_audience %q: %v, want ErrClientInvalid", bad, err)
	}
	both := AudienceBoth
	ci, _, err := h.svc.Clients().Create(ctx, ClientSpec{Name: ptr("a"), RedirectURIs: []string{appRedirect}, AccessTokenAudience: &both})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if ci.AccessTokenAudience != AudienceBoth {
		t.Errorf("created client shows access_token_audience %q", ci.AccessTokenAudience)
	}
	if _, err := h.svc.Clients().Update(ctx, ci.ID, "", ClientSpec{AccessTokenAudience: &bad}); !errors.Is(err, ErrClientInvalid) {
		t.Errorf("Update with access_token_audience %q: %v, want ErrClientInvalid", bad, err)
	}
	cid := AudienceClientID
	if got, err := h.svc.Clients().Update(ctx, ci.ID, "", ClientSpec{AccessTokenAudience: &cid}); err != nil || got.AccessTokenAudience != AudienceClientID {
		t.Errorf("Update to client_id: %+v, %v", got, err)
	}
	cl, err := h.svc.clients.lookup(ctx, ci.ID)
	if err != nil || cl.accessTokenAudience != AudienceClientID {
		t.Errorf("the dynamic client's access_token_audience is %q (%v)", cl.accessTokenAudience, err)
	}
	if got, _ := h.svc.Clients().Get(ctx, "app"); got.AccessTokenAudience != AudienceBaseURL {
		t.Errorf("a static client shows access_token_audience %q, want the default", got.AccessTokenAudience)
	}
}
