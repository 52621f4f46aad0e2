package oidc

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/palmgate/palmgate/core/palm"
)

// A valid S256 challenge (RFC 7636 appendix B) and its verifier.
const (
	pkceVerifierB  = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
	pkceChallengeB = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
)

func TestAuthorizeRefused(t *testing.T) {
	tests := []struct {
		name   string
		params url.Values
		code   string
		// redirect is set when the error goes back to the client.
		redirect bool
	}{
		{"no client_id", params("client_id", ""), ErrInvalidRequest, false},
		{"unknown client", params("client_id", "nobody"), ErrInvalidRequest, false},
		{"client id in other case", params("client_id", "APP"), ErrInvalidRequest, false},
		{"no redirect_uri", params("redirect_uri", ""), ErrInvalidRequest, false},
		{"unregistered redirect_uri", params("redirect_uri", "https://evil.example.test/cb"), ErrInvalidRequest, false},
		{"redirect_uri with trailing slash", params("redirect_uri", appRedirect+"/"), ErrInvalidRequest, false},
		{"redirect_uri host in other case", params("redirect_uri", "https://APP.example.test/cb"), ErrInvalidRequest, false},
		{"redirect_uri path in other case", params("redirect_uri", "https://app.example.test/CB"), ErrInvalidRequest, false},
		{"redirect_uri with query", params("redirect_uri", appRedirect+"?next=/"), ErrInvalidRequest, false},
		{"redirect_uri with fragment", params("redirect_uri", appRedirect+"#x"), ErrInvalidRequest, false},
		{"redirect_uri over http", params("redirect_uri", "http://app.example.test/cb"), ErrInvalidRequest, false},
		{"redirect_uri with explicit port", params("redirect_uri", "https://app.example.test:443/cb"), ErrInvalidRequest, false},
		{"redirect_uri of another client", params("redirect_uri", otherRedir), ErrInvalidRequest, false},
		{"loopback on another port", params("redirect_uri", "http://127.0.0.1:8081/callback"), ErrInvalidRequest, false},
		{"no openid scope", params("scope", "profile email"), ErrInvalidScope, true},
		{"no scope", params("scope", ""), ErrInvalidScope, true},
		{"openid as a prefix", params("scope", "openidx"), ErrInvalidScope, true},
		{"openid in other case", params("scope", "OpenID"), ErrInvalidScope, true},
		{"scope with a quote", params("scope", `openid "x"`), ErrInvalidScope, true},
		{"scope too long", params("scope", "openid "+strings.Repeat("s", 65)), ErrInvalidScope, true},
		{"too many scopes", params("scope", "openid a b c d e f g h i j k l m n o p q r s t"), ErrInvalidScope, true},
		{"response_type token", params("response_type", "token"), ErrUnsupportedResponseType, true},
		{"response_type code id_token", params("response_type", "code id_token"), ErrUnsupportedResponseType, true},
		{"no response_type", params("response_type", ""), ErrInvalidRequest, true},
		{"state of 501 characters", params("state", strings.Repeat("s", 501)), ErrInvalidRequest, true},
		{"nonce of 501 characters", params("nonce", strings.Repeat("n", 501)), ErrInvalidRequest, true},
		{"duplicate state", dup(params(), "state", "other"), ErrInvalidRequest, true},
		{"duplicate client_id", dup(params(), "client_id", "app"), ErrInvalidRequest, false},
		{"duplicate redirect_uri", dup(params(), "redirect_uri", appLoopback), ErrInvalidRequest, false},
		{"duplicate scope", dup(params(), "scope", "openid"), ErrInvalidRequest, true},
		{"PKCE plain", params("code_challenge", pkceVerifierB, "code_challenge_method", "plain"), ErrInvalidRequest, true},
		{"PKCE without method (plain by default)", params("code_challenge", pkceChallengeB), ErrInvalidRequest, true},
		{"PKCE method in lower case", params("code_challenge", pkceChallengeB, "code_challenge_method", "s256"), ErrInvalidRequest, true},
		{"PKCE method without challenge", params("code_challenge_method", "S256"), ErrInvalidRequest, true},
		{"PKCE challenge of 42 characters", params("code_challenge", pkceChallengeB[:42], "code_challenge_method", "S256"), ErrInvalidRequest, true},
		{"PKCE challenge of 129 characters", params("code_challenge", strings.Repeat("a", 129), "code_challenge_method", "S256"), ErrInvalidRequest, true},
		{"PKCE challenge with padding", params("code_challenge", pkceChallengeB+"=", "code_challenge_method", "S256"), ErrInvalidRequest, true},
		{"PKCE challenge in std base64", params("code_challenge", strings.ReplaceAll(pkceChallengeB, "-", "+")+"/", "code_challenge_method", "S256"), ErrInvalidRequest, true},
		{"prompt none", params("prompt", "none"), ErrLoginRequired, true},
		{"prompt none among others", params("prompt", "consent none"), ErrInvalidRequest, true},
		{"prompt unknown", params("prompt", "login sideways"), ErrInvalidRequest, true},
		{"max_age not a number", params("max_age", "soon"), ErrInvalidRequest, true},
		{"max_age negative", params("max_age", "-1"), ErrInvalidRequest, true},
		{"response_mode fragment", params("response_mode", "fragment"), ErrInvalidRequest, true},
		{"response_mode unknown", params("response_mode", "web_message"), ErrInvalidRequest, true},
		{"response_mode twice", dup(params("response_mode", "form_post"), "response_mode", "form_post"), ErrInvalidRequest, true},
		{"form_post, then a refusal", params("response_mode", "form_post", "scope", "profile"), ErrInvalidScope, true},
		{"unlisted resource", params("resource", "https://evil.example.test"), ErrInvalidTarget, true},
		{"request object", params("request", "eyJhbGciOiJub25lIn0.e30."), ErrRequestNotSupported, true},
		{"request_uri", params("request_uri", "https://app.example.test/req.jwt"), ErrRequestURINotSupported, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			ar, err := h.svc.Authorize(context.Background(), tc.params, testBrowser)
			if ar != nil {
				t.Errorf("Authorize returned a request: %+v", ar)
			}
			oe := wantError(t, err, tc.code)
			if tc.redirect {
				// The state goes back when it is valid: given once, at most 500
				// characters; else it is dropped.
				wantState := ""
				if st := tc.params["state"]; len(st) == 1 && len(st[0]) <= MaxStateLen {
					wantState = st[0]
				}
				if oe.RedirectURI != tc.params.Get("redirect_uri") || oe.State != wantState {
					t.Errorf("error goes to %q with state %q, want %q and %q", oe.RedirectURI, oe.State, tc.params.Get("redirect_uri"), wantState)
				}
				// form_post when asked (and valid), else query.
				wantMode := ResponseModeQuery
				if slices.Equal(tc.params["response_mode"], []string{ResponseModeFormPost}) {
					wantMode = ResponseModeFormPost
				}
				if oe.ResponseMode != wantMode {
					t.Errorf("error answered in response mode %q, want %q", oe.ResponseMode, wantMode)
				}
			} else if oe.RedirectURI != "" {
				t.Errorf("error redirects to %q, want no redirect", oe.RedirectURI)
			}
			if oe.Description == "" {
				t.Error("error has no description")
			}
			if n := h.count(t, "oidc/ar/"); n != 0 {
				t.Errorf("%d authorization requests stored", n)
			}
			if n := h.count(t, "palm/c/"); n != 0 {
				t.Errorf("%d palm challenges stored", n)
			}
		})
	}
}

// dup adds a second value to a parameter.
func dup(v url.Values, name, value string) url.Values {
	v.Add(name, value)
	return v
}

func TestAuthorize(t *testing.T) {
	tests := []struct {
		name       string
		params     url.Values
		wantScopes []string
	}{
		{"minimal", params("state", "", "nonce", ""), []string{"openid"}},
		{"state, nonce and PKCE", params("code_challenge", pkceChallengeB, "code_challenge_method", "S256"), []string{"openid"}},
		{"scopes sorted and deduplicated", params("scope", "profile openid offline_access  openid"), []string{"offline_access", "openid", "profile"}},
		{"state of 500 characters", params("state", strings.Repeat("s", 500)), []string{"openid"}},
		{"nonce of 500 characters", params("nonce", strings.Repeat("n", 500)), []string{"openid"}},
		{"second registered redirect_uri", params("redirect_uri", appLoopback), []string{"openid"}},
		{"PKCE challenge of 128 characters", params("code_challenge", strings.Repeat("a", 128), "code_challenge_method", "S256"), []string{"openid"}},
		{"prompt login", params("prompt", "login"), []string{"openid"}},
		{"prompt consent select_account", params("prompt", "consent select_account"), []string{"openid"}},
		{"max_age", params("max_age", "3600"), []string{"openid"}},
		{"max_age 0", params("max_age", "0"), []string{"openid"}},
		{"response_mode query", params("response_mode", "query"), []string{"openid"}},
		{"response_mode form_post", params("response_mode", "form_post"), []string{"openid"}},
		{"client with a sector", params("client_id", "other", "redirect_uri", otherRedir), []string{"openid"}},
		{"unknown extra parameter", params("ui_locales", "fr"), []string{"openid"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			now := h.clock.Now()
			ar := h.authorize(t, tc.params)
			p := tc.params
			if _, err := uuid.Parse(ar.ID); err != nil {
				t.Errorf("request id %q is not a uuid", ar.ID)
			}
			if ar.ClientID != p.Get("client_id") || ar.RedirectURI != p.Get("redirect_uri") ||
				ar.State != p.Get("state") || ar.Nonce != p.Get("nonce") || ar.CodeChallenge != p.Get("code_challenge") {
				t.Errorf("request = %+v, from %v", ar, p)
			}
			if !slices.Equal(ar.Scopes, tc.wantScopes) {
				t.Errorf("scopes = %v, want %v", ar.Scopes, tc.wantScopes)
			}
			if ar.Status != RequestPending || ar.HumanID != "" || !ar.ExpiresAt.Equal(now.Add(loginTTL)) || ar.ChallengeID == "" {
				t.Errorf("request = %+v, want pending, expiring at %v", ar, now.Add(loginTTL))
			}

			st, err := h.svc.Login(context.Background(), ar.ID, testBinding, true)
			if err != nil {
				t.Fatalf("Login: %v", err)
			}
			if st.Request.ID != ar.ID || st.Request.ChallengeID != ar.ChallengeID || !slices.Equal(st.Request.Scopes, ar.Scopes) ||
				st.Request.State != ar.State || st.Request.Nonce != ar.Nonce || st.Request.CodeChallenge != ar.CodeChallenge {
				t.Errorf("stored request = %+v, want %+v", st.Request, ar)
			}
			c := st.Challenge
			wantName := map[string]string{"app": "Example App", "other": "other"}[ar.ClientID]
			if c.ID != ar.ChallengeID || c.Status != palm.StatusPending || c.Purpose != palm.PurposeLogin || c.Ref != ar.ID ||
				!time.Time(c.ExpiresAt).Equal(ar.ExpiresAt) || c.Request.ClientName != wantName || !slices.Equal(c.Request.Scopes, ar.Scopes) {
				t.Errorf("challenge = %+v", c)
			}
			if got := h.svc.ClientName(ar); got != wantName {
				t.Errorf("ClientName = %q, want %q", got, wantName)
			}
			if r, err := h.svc.Finish(context.Background(), ar.ID, testBinding); r != nil || err != nil {
				t.Errorf("Finish while pending = %+v, %v; want nil, nil", r, err)
			}
			if n := h.count(t, "oidc/code/"); n != 0 {
				t.Errorf("%d codes stored while pending", n)
			}
		})
	}
}

func TestLoginUnknownRequest(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{uuid.NewString(), "", "not-a-uuid", "urn:uuid:" + uuid.NewString()} {
		if _, err := h.svc.Login(context.Background(), id, testBinding, true); err == nil {
			t.Errorf("Login(%q) succeeded", id)
		}
		if _, err := h.svc.Finish(context.Background(), id, testBinding); err == nil {
			t.Errorf("Finish(%q) succeeded", id)
		}
	}
}

// TestFinishEnds covers how a login ends: a code once verified, access_denied once
// denied or expired, and one answer only.
func TestFinishEnds(t *testing.T) {
	tests := []struct {
		name string
		// act runs on a fresh pending request of app.
		act      func(t *testing.T, h *harness, ar *AuthRequest)
		wantCode bool
	}{
		{"verified", func(t *testing.T, h *harness, ar *AuthRequest) { h.scan(t, ar, "alice") }, true},
		{"verified just before expiry", func(t *testing.T, h *harness, ar *AuthRequest) {
			h.clock.Advance(loginTTL - time.Second)
			h.scan(t, ar, "alice")
			h.clock.Advance(VerifiedLoginWindow - time.Second) // past the request's expiry, within the scan's window
		}, true},
		{"denied", func(t *testing.T, h *harness, ar *AuthRequest) {
			st, err := h.svc.Login(context.Background(), ar.ID, testBinding, true)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.palm.Deny(context.Background(), ar.ChallengeID, st.Challenge.Nonce); err != nil {
				t.Fatalf("Deny: %v", err)
			}
			if st, _ := h.svc.Login(context.Background(), ar.ID, testBinding, true); st.Request.Status != RequestDenied {
				t.Errorf("request status after Deny = %s", st.Request.Status)
			}
		}, false},
		{"expired", func(t *testing.T, h *harness, ar *AuthRequest) {
			h.clock.Advance(loginTTL)
			st, err := h.svc.Login(context.Background(), ar.ID, testBinding, true)
			if err != nil {
				t.Fatal(err)
			}
			if st.Challenge.Status != palm.StatusExpired {
				t.Errorf("challenge status = %s, want expired", st.Challenge.Status)
			}
			if _, err := h.palm.DevScan(context.Background(), ar.ChallengeID, st.Challenge.Nonce, "alice"); !errors.Is(err, palm.ErrExpired) {
				t.Errorf("DevScan after expiry: %v, want palm.ErrExpired", err)
			}
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			ar := h.authorize(t, params("scope", "openid offline_access"))
			tc.act(t, h, ar)
			r, err := h.svc.Finish(context.Background(), ar.ID, testBinding)
			if err != nil || r == nil {
				t.Fatalf("Finish = %+v, %v", r, err)
			}
			if r.URI != appRedirect || r.State != "st-123" {
				t.Errorf("redirect = %+v", r)
			}
			u, err := url.Parse(r.URL())
			if err != nil || u.Host != "app.example.test" || u.Path != "/cb" || u.Query().Get("state") != "st-123" {
				t.Errorf("URL() = %q", r.URL())
			}
			if tc.wantCode {
				if r.Code == "" || r.Error != "" || u.Query().Get("code") != r.Code || u.Query().Has("error") {
					t.Errorf("redirect = %+v, URL %q; want a code", r, r.URL())
				}
				if n := h.count(t, "oidc/code/"); n != 1 {
					t.Errorf("%d codes stored, want 1", n)
				}
			} else {
				if r.Code != "" || r.Error != ErrAccessDenied || u.Query().Get("error") != ErrAccessDenied || u.Query().Has("code") {
					t.Errorf("redirect = %+v, URL %q; want access_denied", r, r.URL())
				}
				if n := h.count(t, "oidc/code/"); n != 0 {
					t.Errorf("%d codes stored, want none", n)
				}
			}
			st, err := h.svc.Login(context.Background(), ar.ID, testBinding, true)
			if err != nil || st.Request.Status != RequestAnswered {
				t.Errorf("request after Finish = %+v, %v; want answered", st, err)
			}
			again, err := h.svc.Finish(context.Background(), ar.ID, testBinding)
			if again != nil {
				t.Errorf("second Finish = %+v", again)
			}
			wantError(t, err, ErrInvalidRequest)
			if tc.wantCode {
				if n := h.count(t, "oidc/code/"); n != 1 {
					t.Errorf("second Finish left %d codes, want 1", n)
				}
			}
		})
	}
}

func TestRedirectURLKeepsQuery(t *testing.T) {
	r := &Redirect{URI: "https://app.example.test/cb?tenant=a%20b", Code: "c0de", State: "s&t=1"}
	u, err := url.Parse(r.URL())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if q.Get("tenant") != "a b" || q.Get("code") != "c0de" || q.Get("state") != "s&t=1" || len(q) != 3 {
		t.Errorf("URL() = %q", r.URL())
	}
}

// TestFinishResponseMode: the response mode of the request is stored with it and
// used by the answer after the palm scan (the code) and after a denial.
func TestFinishResponseMode(t *testing.T) {
	for _, mode := range []string{"", ResponseModeQuery, ResponseModeFormPost} {
		t.Run("mode "+mode, func(t *testing.T) {
			h := newHarness(t)
			want := mode
			if want == "" {
				want = ResponseModeQuery
			}
			verified := h.authorize(t, params("response_mode", mode))
			if verified.ResponseMode != want {
				t.Errorf("stored response mode %q, want %q", verified.ResponseMode, want)
			}
			h.scan(t, verified, "alice")
			code, err := h.svc.Finish(context.Background(), verified.ID, testBinding)
			if err != nil || code == nil || code.Code == "" || code.Mode != want {
				t.Fatalf("Finish after the scan = %+v, %v; want a code in mode %q", code, err, want)
			}
			ar := h.authorize(t, params("response_mode", mode))
			st, err := h.svc.Login(context.Background(), ar.ID, testBinding, true)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.palm.Deny(context.Background(), ar.ChallengeID, st.Challenge.Nonce); err != nil {
				t.Fatalf("Deny: %v", err)
			}
			denied, err := h.svc.Finish(context.Background(), ar.ID, testBinding)
			if err != nil || denied == nil || denied.Error != ErrAccessDenied || denied.Description == "" {
				t.Fatalf("Finish after a denial = %+v, %v", denied, err)
			}
			if denied.Mode != want || denied.FormPost() != (want == ResponseModeFormPost) {
				t.Errorf("denied login answered in mode %q, want %q", denied.Mode, want)
			}
		})
	}
}
