package oidc

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/core/keys"
)

const dynLoggedOut = "https://dyn.example.test/bye"

// TestEndSessionDynamicClient (issue 18, finding 3): RP-initiated logout knows the
// dynamic clients as it knows the static ones: an id_token_hint of a dynamic
// client ends its login and sends the browser to its registered
// post_logout_redirect_uri; client_id names it; what it did not register is
// refused; a deleted client's hint is refused.
func TestEndSessionDynamicClient(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	ci, _, err := h.svc.Clients().Create(ctx, ClientSpec{Name: ptr("Dyn App"), RedirectURIs: []string{appRedirect},
		PostLogoutRedirectURIs: []string{dynLoggedOut}, Owner: "dev-1"})
	if err != nil {
		t.Fatalf("CreateClient: %v", err)
	}
	if !slices.Equal(ci.PostLogoutRedirectURIs, []string{dynLoggedOut}) {
		t.Fatalf("created client's post_logout_redirect_uris = %v", ci.PostLogoutRedirectURIs)
	}
	login := func() *TokenResponse {
		return h.exchange(t, h.login(t, params("client_id", ci.ID, "scope", "openid offline_access"), "alice"), "")
	}

	tok, kept := login(), login()
	out, err := h.svc.EndSession(ctx, url.Values{"id_token_hint": {tok.IDToken}, "post_logout_redirect_uri": {dynLoggedOut}, "state": {"s-1"}})
	if err != nil {
		t.Fatalf("EndSession with a dynamic client's hint: %v", err)
	}
	if out.ClientID != ci.ID || out.GrantID == "" || out.URL() != dynLoggedOut+"?state=s-1" {
		t.Fatalf("EndSession = %+v, URL %q; want %s's login ended and its post-logout URI", out, out.URL(), ci.ID)
	}
	if _, err := h.svc.Refresh(ctx, ci.ID, tok.RefreshToken, ""); err == nil {
		t.Error("the dynamic client's refresh token still works after logout")
	}
	if _, err := h.svc.VerifyAccessToken(ctx, tok.AccessToken); err == nil {
		t.Error("the dynamic client's access token still works after logout")
	}
	if _, err := h.svc.VerifyAccessToken(ctx, kept.AccessToken); err != nil {
		t.Errorf("another login of the client was ended: %v", err)
	}

	// client_id and hint together; client_id alone with a registered URI.
	if out, err := h.svc.EndSession(ctx, url.Values{"id_token_hint": {kept.IDToken}, "client_id": {ci.ID}}); err != nil || out.GrantID == "" {
		t.Errorf("EndSession with client_id %s and its hint = %+v, %v; want its login ended", ci.ID, out, err)
	}
	if out, err := h.svc.EndSession(ctx, url.Values{"client_id": {ci.ID}, "post_logout_redirect_uri": {dynLoggedOut}}); err != nil || out.URL() != dynLoggedOut {
		t.Errorf("EndSession with client_id %s alone = %+v, %v; want a redirect to %s", ci.ID, out, err, dynLoggedOut)
	}

	refused := []struct {
		name string
		q    url.Values
	}{
		{"unregistered post-logout URI", url.Values{"client_id": {ci.ID}, "post_logout_redirect_uri": {appLoggedOut}}},
		{"a redirect_uri is no post-logout URI", url.Values{"client_id": {ci.ID}, "post_logout_redirect_uri": {appRedirect}}},
		{"a static client's hint with the dynamic client_id", url.Values{"client_id": {ci.ID}, "id_token_hint": {h.offlineLogin(t).IDToken}}},
		{"unknown dynamic client_id", url.Values{"client_id": {"pg_AAAAAAAAAAAAAAAAAAAAAA"}}},
	}
	for _, tc := range refused {
		if _, err := h.svc.EndSession(ctx, tc.q); err == nil {
			t.Errorf("%s: EndSession accepted %v", tc.name, tc.q)
		} else {
			wantError(t, err, ErrInvalidRequest)
		}
	}

	// A deleted client's hint names no client any more.
	last := login()
	if err := h.svc.Clients().Delete(ctx, ci.ID, ""); err != nil {
		t.Fatalf("DeleteClient: %v", err)
	}
	_, err = h.svc.EndSession(ctx, url.Values{"id_token_hint": {last.IDToken}})
	if oe := wantError(t, err, ErrInvalidRequest); !strings.Contains(oe.Description, "unknown client") {
		t.Errorf("a deleted client's hint: %q, want unknown client", oe.Description)
	}
}

// TestDynamicClientIDTokenAlg (issue 18, finding 3): a dynamic client's
// id_token_signed_response_alg signs its ID tokens, can be changed, defaults to
// RS256; an algorithm palmgate does not sign ID tokens with is refused.
func TestDynamicClientIDTokenAlg(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	ci, _, err := h.svc.Clients().Create(ctx, ClientSpec{Name: ptr("Elliptic App"), RedirectURIs: []string{appRedirect}, IDTokenAlg: ptr(keys.ES256)})
	if err != nil {
		t.Fatalf("CreateClient: %v", err)
	}
	if ci.IDTokenAlg != keys.ES256 {
		t.Errorf("created client's id_token_signed_response_alg = %q, want ES256", ci.IDTokenAlg)
	}
	idAlg := func() string {
		t.Helper()
		resp := h.exchange(t, h.login(t, params("client_id", ci.ID, "scope", "openid offline_access"), "alice"), "")
		return h.parseToken(t, resp.IDToken, h.mustGet(t, ci.ID).IDTokenAlg, &IDClaims{})["alg"].(string)
	}
	if got := idAlg(); got != keys.ES256 {
		t.Errorf("ID token alg %s, want ES256", got)
	}
	if _, err := h.svc.Clients().Update(ctx, ci.ID, "", ClientSpec{IDTokenAlg: ptr(keys.EdDSA)}); err != nil {
		t.Fatalf("UpdateClient to EdDSA: %v", err)
	}
	if got := idAlg(); got != keys.EdDSA {
		t.Errorf("ID token alg after the update %s, want EdDSA", got)
	}
	if got, _ := h.svc.Clients().Update(ctx, ci.ID, "", ClientSpec{IDTokenAlg: ptr("")}); got == nil || got.IDTokenAlg != keys.RS256 {
		t.Errorf("an empty alg = %+v, want RS256", got)
	}
	if got := idAlg(); got != keys.RS256 {
		t.Errorf("ID token alg after resetting %s, want RS256", got)
	}
	plain, _ := h.createClient(t, "", appRedirect)
	if plain.IDTokenAlg != keys.RS256 || plain.PostLogoutRedirectURIs == nil || len(plain.PostLogoutRedirectURIs) != 0 {
		t.Errorf("a client created without either = %+v, want RS256 and no post-logout URIs", plain)
	}
	for _, alg := range []string{"HS256", "none", "PS256", "rs256", "ES256 " + "x"} {
		_, _, err := h.svc.Clients().Create(ctx, ClientSpec{Name: ptr("Bad"), RedirectURIs: []string{appRedirect}, IDTokenAlg: ptr(alg)})
		if !errors.Is(err, ErrClientInvalid) || !strings.Contains(err.Error(), "id_token_signed_response_alg") {
			t.Errorf("create with alg %q: %v, want ErrClientInvalid naming id_token_signed_response_alg", alg, err)
		}
		if _, err := h.svc.Clients().Update(ctx, ci.ID, "", ClientSpec{IDTokenAlg: ptr(alg)}); !errors.Is(err, ErrClientInvalid) {
			t.Errorf("update to alg %q: %v, want ErrClientInvalid", alg, err)
		}
	}
}

func (h *harness) mustGet(t *testing.T, id string) *ClientInfo {
	t.Helper()
	ci, err := h.svc.Clients().Get(context.Background(), id)
	if err != nil {
		t.Fatalf("GetClient(%s): %v", id, err)
	}
	return ci
}

// TestDynamicClientPostLogoutURIs (issue 18, finding 3): post-logout redirect URIs
// follow the rules of redirect URIs, are deduplicated, replaced by an update, left
// alone by an update that does not name them, cleared by an empty list.
func TestDynamicClientPostLogoutURIs(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	ci, _, err := h.svc.Clients().Create(ctx, ClientSpec{Name: ptr("Dyn"), RedirectURIs: []string{appRedirect},
		PostLogoutRedirectURIs: []string{" " + dynLoggedOut, dynLoggedOut, "http://localhost:8080/bye"}})
	if err != nil {
		t.Fatalf("CreateClient: %v", err)
	}
	if want := []string{dynLoggedOut, "http://localhost:8080/bye"}; !slices.Equal(ci.PostLogoutRedirectURIs, want) {
		t.Errorf("post_logout_redirect_uris = %v, want %v", ci.PostLogoutRedirectURIs, want)
	}
	got, err := h.svc.Clients().Update(ctx, ci.ID, "", ClientSpec{Name: ptr("Dyn 2")})
	if err != nil || len(got.PostLogoutRedirectURIs) != 2 {
		t.Errorf("an update without them = %+v, %v; want them unchanged", got, err)
	}
	if got, err = h.svc.Clients().Update(ctx, ci.ID, "", ClientSpec{PostLogoutRedirectURIs: []string{appLoggedOut}}); err != nil || !slices.Equal(got.PostLogoutRedirectURIs, []string{appLoggedOut}) {
		t.Errorf("replacing them = %+v, %v", got, err)
	}
	if got, err = h.svc.Clients().Update(ctx, ci.ID, "", ClientSpec{PostLogoutRedirectURIs: []string{}}); err != nil || len(got.PostLogoutRedirectURIs) != 0 {
		t.Errorf("clearing them = %+v, %v", got, err)
	}
	if _, err := h.svc.EndSession(ctx, url.Values{"client_id": {ci.ID}, "post_logout_redirect_uri": {appLoggedOut}}); err == nil {
		t.Error("a cleared post-logout URI is still accepted by logout")
	}
	many := make([]string, MaxRedirectURIs+1)
	for i := range many {
		many[i] = dynLoggedOut + "/" + strings.Repeat("x", i+1)
	}
	for name, uris := range map[string][]string{
		"relative": {"/bye"}, "fragment": {"https://a.test/bye#x"}, "http": {"http://a.test/bye"},
		"javascript": {"javascript:alert(1)"}, "empty": {""}, "too many": many,
	} {
		_, _, err := h.svc.Clients().Create(ctx, ClientSpec{Name: ptr("Bad"), RedirectURIs: []string{appRedirect}, PostLogoutRedirectURIs: uris})
		if !errors.Is(err, ErrClientInvalid) || !strings.Contains(err.Error(), "post_logout_redirect_uri") {
			t.Errorf("%s: create = %v, want ErrClientInvalid naming post_logout_redirect_uri", name, err)
		}
		if _, err := h.svc.Clients().Update(ctx, ci.ID, "", ClientSpec{PostLogoutRedirectURIs: uris}); !errors.Is(err, ErrClientInvalid) {
			t.Errorf("%s: update = %v, want ErrClientInvalid", name, err)
		}
	}
}
