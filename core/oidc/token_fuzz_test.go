package oidc

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/storage"
)

// Placeholders of FuzzTokenForm's inputs, replaced before parsing by credentials that
// are live in the run's store. Live credentials cannot be seeds themselves: the
// coordinator and each worker of a fuzz run have their own store and keys.
const (
	// fuzzLiveCode is an unused authorization code of client app for fuzzRedirect,
	// bound to a PKCE challenge whose verifier only the test knows: no input can
	// redeem it, so every exchange of it must be refused and leave it unused.
	fuzzLiveCode = "$CODE"
	// fuzzLiveRefresh is the current refresh token of a grant of client app with
	// scopes openid, offline_access and profile. A refresh with it may succeed; the
	// test then puts the family back, so that it stays the current token.
	fuzzLiveRefresh = "$REFRESH"
)

// completeLogin runs the palm scan of ar (dev mode) and Finish, returning the code.
func (p *fuzzProvider) completeLogin(f *testing.F, ar *AuthRequest) string {
	f.Helper()
	ctx := context.Background()
	st, err := p.svc.Login(ctx, ar.ID, testBinding, true)
	if err != nil {
		f.Fatalf("Login: %v", err)
	}
	if _, err := p.palm.DevScan(ctx, ar.ChallengeID, st.Challenge.Nonce, "alice"); err != nil {
		f.Fatalf("DevScan: %v", err)
	}
	r, err := p.svc.Finish(ctx, ar.ID, testBinding)
	if err != nil || r == nil || r.Code == "" {
		f.Fatalf("Finish = %+v, %v; want a code", r, err)
	}
	return r.Code
}

// FuzzTokenForm: the token endpoint's grants (ExchangeCode, Refresh), fed from any
// form as the edge feeds them for an authenticated client, never panic; every error
// is an *Error with a token error code; a refused request leaves the store unchanged
// (counts and contents), except a reused code or refresh token, which revokes its
// grant; no input redeems the live code without its verifier; and a refresh succeeds
// only with the live refresh token itself, for its client, within its scopes.
func FuzzTokenForm(f *testing.F) {
	p := newFuzzProvider(f)
	ctx := context.Background()

	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	verifier := base64.RawURLEncoding.EncodeToString(secret)
	sum := sha256.Sum256([]byte(verifier))
	ar, err := p.svc.Authorize(ctx, url.Values{
		"response_type": {"code"}, "client_id": {"app"}, "redirect_uri": {fuzzRedirect},
		"scope": {"openid profile"}, "state": {"s"}, "nonce": {"n"},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {pkceS256},
	}, testBrowser)
	if err != nil {
		f.Fatalf("Authorize: %v", err)
	}
	liveCode := p.completeLogin(f, ar)

	ar, err = p.svc.Authorize(ctx, url.Values{
		"response_type": {"code"}, "client_id": {"app"}, "redirect_uri": {fuzzRedirect},
		"scope": {"openid offline_access profile"},
	}, testBrowser)
	if err != nil {
		f.Fatalf("Authorize: %v", err)
	}
	first, err := p.svc.ExchangeCode(ctx, "app", p.completeLogin(f, ar), fuzzRedirect, "")
	if err != nil || first.RefreshToken == "" {
		f.Fatalf("ExchangeCode = %+v, %v; want a refresh token", first, err)
	}
	liveRefresh := first.RefreshToken
	var live RefreshClaims
	if _, _, err := jwt.NewParser().ParseUnverified(liveRefresh, &live); err != nil {
		f.Fatalf("parsing the refresh token: %v", err)
	}
	liveSigned := liveRefresh[:strings.LastIndexByte(liveRefresh, '.')+1]
	granted := []string{ScopeOfflineAccess, ScopeOpenID, "profile"}

	substitute := strings.NewReplacer(fuzzLiveCode, liveCode, fuzzLiveRefresh, liveRefresh)
	f.Add("grant_type=authorization_code&code=$CODE&redirect_uri=" + url.QueryEscape(fuzzRedirect) + "&code_verifier=" + strings.Repeat("v", 43))
	f.Add("grant_type=refresh_token&refresh_token=$REFRESH&scope=openid+profile")

	f.Fuzz(func(t *testing.T, form string) {
		params, _ := url.ParseQuery(substitute.Replace(form))
		clientID := params.Get("client_id") // the authenticated client: app unless another is named
		if p.svc.clients.get(clientID) == nil {
			clientID = "app"
		}
		before := p.state(t)
		var resp *TokenResponse
		var err error
		grantType := params.Get("grant_type")
		switch grantType { // as the edge's handleToken dispatches
		case "authorization_code":
			resp, err = p.svc.ExchangeCode(ctx, clientID, params.Get("code"), params.Get("redirect_uri"), params.Get("code_verifier"), params["resource"]...)
		case "refresh_token":
			resp, err = p.svc.Refresh(ctx, clientID, params.Get("refresh_token"), params.Get("scope"), params["resource"]...)
		default:
			return // answered by the edge without calling the service
		}
		if err != nil {
			if resp != nil {
				t.Fatalf("%s returned tokens and an error: %v", grantType, err)
			}
			oe := wantOAuthError(t, err, ErrInvalidRequest, ErrInvalidGrant, ErrInvalidScope, ErrInvalidTarget, ErrUnsupportedGrantType)
			if oe.Code == ErrInvalidGrant && strings.Contains(oe.Description, "already used") {
				return // a reused code or refresh token legitimately revokes its grant
			}
			unchanged(t, before, p.state(t), "refused "+grantType+" ("+oe.Code+": "+oe.Description+")")
			return
		}
		// An ID token exactly when openid is granted (a refresh may narrow it away).
		if resp == nil || resp.AccessToken == "" || (resp.IDToken == "") == slices.Contains(strings.Fields(resp.Scope), ScopeOpenID) || resp.TokenType != "Bearer" {
			t.Fatalf("%s succeeded with %+v", grantType, resp)
		}
		if grantType == "authorization_code" {
			t.Fatalf("redeemed code %q (client %s, redirect_uri %q) without the code_verifier",
				params.Get("code"), clientID, params.Get("redirect_uri"))
		}

		// A successful refresh: only the live token, for its client, within its scopes.
		if !strings.HasPrefix(params.Get("refresh_token"), liveSigned) || clientID != "app" {
			t.Fatalf("refreshed with %q for client %s", params.Get("refresh_token"), clientID)
		}
		scopes := strings.Fields(resp.Scope)
		asked := strings.Fields(params.Get("scope"))
		for _, sc := range scopes {
			if !slices.Contains(granted, sc) || (len(asked) > 0 && !slices.Contains(asked, sc)) {
				t.Fatalf("refresh granted scope %q (granted %v, asked %v)", sc, granted, asked)
			}
		}
		if resp.RefreshToken == "" || resp.RefreshToken == liveRefresh {
			t.Fatalf("refresh did not rotate the refresh token")
		}
		// Put the family back: the live token is current again, and the store is as it
		// was (a refresh writes nothing but the family's current token id).
		err = p.store.Update(ctx, func(txn storage.Txn) error {
			g, err := getGrant(txn, live.GrantID)
			if err != nil {
				return err
			}
			g.RefreshJTI = live.ID
			return p.svc.putGrant(txn, live.GrantID, g, 0)
		})
		if err != nil {
			t.Fatalf("restoring the refresh family: %v", err)
		}
		unchanged(t, before, p.state(t), "a refresh, once its family is put back,")
	})
}
