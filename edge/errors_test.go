package edge_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/edge"
)

// TestNoSuchEndpoint: unknown paths, paths with dot or empty segments and wrong
// methods answer in their path's dialect, with Allow on a 405: the /v1 body under
// /v1 (and /health, the portal off), OAuth's {"error":"invalid_request",
// "error_description"} under /oauth2 and the /.well-known documents (fourth
// review: an OAuth client reads error as a code, and got prose), the error page
// to a browser everywhere.
func TestNoSuchEndpoint(t *testing.T) {
	e := newEnv(t, withRegistration(oidc.RegistrationConfig{}))
	for _, target := range []string{"/v1/nothing", "/v1/agent/verify/device/x/../../../../oauth2/jwks", "/v1//human/leaderboard", "/portal", "/portal/apps", "/health/nothing"} { // the portal is off here
		w := e.get(t, target)
		wantV1Error(t, w, http.StatusNotFound, "not_found", "")
		if loc := w.Header().Get("Location"); loc != "" {
			t.Errorf("%s: redirected to %q", target, loc)
		}
	}
	for _, target := range []string{"/oauth2/nothing", "/oauth2//token", "/oauth2/x/../jwks", "/.well-known/oauth-authorization-server/elsewhere"} {
		w := e.get(t, target)
		if m := wantOAuthError(t, w, http.StatusNotFound, "invalid_request"); m["error_description"] == "" || m["error_description"] == nil {
			t.Errorf("%s: no error_description: %s", target, w.Body)
		}
		if loc := w.Header().Get("Location"); loc != "" {
			t.Errorf("%s: redirected to %q", target, loc)
		}
	}
	// A wrong method on each OAuth JSON endpoint: OAuth's dialect, with Allow.
	for _, tc := range []struct{ method, target, allow string }{
		{http.MethodDelete, "/oauth2/userinfo", "GET, OPTIONS, POST"}, // OPTIONS: the CORS preflight
		{http.MethodGet, "/oauth2/token", "OPTIONS, POST"},
		{http.MethodGet, "/oauth2/revoke", "OPTIONS, POST"},
		{http.MethodGet, "/oauth2/introspect", "POST"},
		{http.MethodGet, "/oauth2/register", "OPTIONS, POST"},
		{http.MethodPost, "/oauth2/jwks", "GET, OPTIONS"},
		{http.MethodPost, "/oauth2/.well-known/openid-configuration", "GET, OPTIONS"},
		{http.MethodPut, "/.well-known/oauth-authorization-server/oauth2", "GET, OPTIONS"},
		{http.MethodPut, "/oauth2/authorize", "GET, POST"},
		{http.MethodPut, "/oauth2/logout", "GET, POST"},
	} {
		w := e.do(t, req{method: tc.method, target: tc.target})
		wantOAuthError(t, w, http.StatusMethodNotAllowed, "invalid_request")
		if w.Header().Get("Allow") != tc.allow {
			t.Errorf("%s %s: Allow = %q, want %s", tc.method, tc.target, w.Header().Get("Allow"), tc.allow)
		}
	}
	// /v1 keeps its own.
	w := e.do(t, req{method: http.MethodDelete, target: "/v1/human/leaderboard"})
	wantV1Error(t, w, http.StatusMethodNotAllowed, "method_not_allowed", "")
	// A person who lands on a browser route with a wrong method gets the page.
	for _, target := range []string{"/oauth2/authorize", "/oauth2/logout", "/oauth2/verify", "/oauth2/token"} {
		w := e.do(t, req{method: http.MethodPut, target: target, header: http.Header{"Accept": {browserAccept}}})
		wantPage(t, w, http.StatusMethodNotAllowed, "This page cannot be used this way")
	}
	wantPage(t, e.getPage(t, "/oauth2/nothing"), http.StatusNotFound, "Page not found")
}

// TestBodyTooLarge: a body over 64 KiB is 413 in each dialect: the /v1 body, the
// OAuth body, the signed-out page.
func TestBodyTooLarge(t *testing.T) {
	e := newEnv(t)
	big := strings.Repeat("a", 65<<10)
	w := e.postJSON(t, "/v1/agent/verify/signature", `{"message":"`+big+`"}`)
	wantV1Error(t, w, http.StatusRequestEntityTooLarge, "body_too_large", "")
	w = e.postJSON(t, "/v1/palm/challenges/x/assertion", `{"assertion":"`+big+`"}`)
	wantV1Error(t, w, http.StatusRequestEntityTooLarge, "body_too_large", "")

	form := url.Values{"grant_type": {"authorization_code"}, "code": {big}}
	wantOAuthError(t, e.postForm(t, "/oauth2/token", form, nil), http.StatusRequestEntityTooLarge, "invalid_request")
	wantOAuthError(t, e.postForm(t, "/oauth2/authorize", form, nil), http.StatusRequestEntityTooLarge, "invalid_request")

	w = e.postForm(t, "/oauth2/logout", url.Values{"state": {big}}, http.Header{"Accept": {browserAccept}})
	wantPage(t, w, http.StatusRequestEntityTooLarge, "Sign-out refused")
	wantOAuthError(t, e.postForm(t, "/oauth2/logout", url.Values{"state": {big}}, nil), http.StatusRequestEntityTooLarge, "invalid_request")
}

// TestRateLimit: past the rate limit, unauthenticated writes are 429 with
// Retry-After, each in its route's dialect (the /v1 body, OAuth's
// temporarily_unavailable, the signed-out page); failed token requests count and
// a client out of them is refused before its credentials are checked.
func TestRateLimit(t *testing.T) {
	t.Run("v1", func(t *testing.T) {
		e := newEnv(t, withRateLimit(2))
		for i := range 2 {
			wantStatus(t, e.postJSON(t, "/v1/agent/register/init", newAgent("rl"+string(rune('a'+i))).registration(e.clock.Now())), http.StatusCreated)
		}
		w := e.postJSON(t, "/v1/agent/register/init", newAgent("rlc").registration(e.clock.Now()))
		wantV1Error(t, w, http.StatusTooManyRequests, "rate_limited", "")
		wantRetryAfter(t, w)
		// Reads are not limited.
		wantStatus(t, e.get(t, "/v1/agent/verify/device/rla"), http.StatusOK)
	})
	t.Run("authorize", func(t *testing.T) {
		e := newEnv(t, withRateLimit(1))
		e.authorize(t, authorizeQuery())
		w := e.get(t, "/oauth2/authorize?"+authorizeQuery().Encode())
		wantOAuthError(t, w, http.StatusTooManyRequests, "temporarily_unavailable")
		wantRetryAfter(t, w)
		if w.Header().Get("Location") != "" || len(w.Result().Cookies()) != 0 {
			t.Error("a refused authorization request redirected or set a cookie")
		}
	})
	t.Run("logout", func(t *testing.T) {
		e := newEnv(t, withRateLimit(1))
		e.getPage(t, "/oauth2/logout")
		w := e.getPage(t, "/oauth2/logout")
		wantStatus(t, w, http.StatusTooManyRequests)
		wantRetryAfter(t, w)
		if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Errorf("Content-Type %q, want the signed-out page", ct)
		}
		w = e.get(t, "/oauth2/logout") // a program
		wantOAuthError(t, w, http.StatusTooManyRequests, "temporarily_unavailable")
		wantRetryAfter(t, w)
	})
	t.Run("token failures", func(t *testing.T) {
		e := newEnv(t, withRateLimit(2))
		bad := codeForm("whatever")
		bad.Set("client_secret", "wrong")
		for range 2 {
			wantOAuthError(t, e.postForm(t, "/oauth2/token", bad, nil), http.StatusUnauthorized, "invalid_client")
		}
		w := e.postForm(t, "/oauth2/token", codeForm("whatever"), nil) // the right secret, now
		wantOAuthError(t, w, http.StatusTooManyRequests, "temporarily_unavailable")
		wantRetryAfter(t, w)
		if strings.Contains(w.Body.String(), "invalid_grant") {
			t.Error("a client out of requests had its request checked")
		}
	})
}

// TestStoreUnavailable: with the database down, each dialect answers 503 with
// Retry-After, never a 500: the /v1 body (storage_unavailable), OAuth's
// temporarily_unavailable, the RFC 6750 refusal of a token that cannot be checked
// for revocation, and the signed-out page.
func TestStoreUnavailable(t *testing.T) {
	e := newEnv(t)
	tok := e.tokens(t, "alice")
	code := e.code(t, "alice")
	session := e.register(t, newAgent("down"), "alice")
	e.store.Down.Store(true)

	t.Run("v1", func(t *testing.T) {
		for _, w := range []*recorder{
			e.get(t, "/v1/agent/verify/device/nobody"),
			e.get(t, "/v1/agent/register/"+session+"/status"),
			e.postJSON(t, "/v1/agent/register/init", newAgent("new").registration(e.clock.Now())),
		} {
			wantV1Error(t, w, http.StatusServiceUnavailable, "storage_unavailable", "")
			wantRetryAfter(t, w)
		}
	})
	t.Run("oauth", func(t *testing.T) {
		for _, w := range []*recorder{
			e.postForm(t, "/oauth2/token", codeForm(code), nil),
			e.get(t, "/oauth2/authorize?"+authorizeQuery().Encode()),
			e.postForm(t, "/oauth2/introspect", url.Values{"token": {tok["refresh_token"].(string)}, "client_id": {testClientID}, "client_secret": {testSecret}}, nil),
		} {
			wantOAuthError(t, w, http.StatusServiceUnavailable, "temporarily_unavailable")
			wantRetryAfter(t, w)
		}
	})
	t.Run("bearer", func(t *testing.T) {
		e.clock.Advance(3 * time.Second) // past the age a revocation set may have
		for _, target := range []string{"/oauth2/userinfo", "/oauth2/check"} {
			w := e.do(t, req{method: http.MethodGet, target: target, header: bearer(tok["access_token"].(string))})
			wantOAuthError(t, w, http.StatusServiceUnavailable, "temporarily_unavailable")
			wantRetryAfter(t, w)
			if w.Header().Get("X-Palmgate-Sub") != "" {
				t.Errorf("%s: an unchecked token was admitted", target)
			}
		}
	})
	t.Run("page", func(t *testing.T) {
		q := url.Values{"id_token_hint": {tok["id_token"].(string)}, "post_logout_redirect_uri": {testPostLogout}}
		w := e.getPage(t, "/oauth2/logout?"+q.Encode())
		wantPage(t, w, http.StatusServiceUnavailable, "unavailable")
		wantRetryAfter(t, w)
		if w.Header().Get("Location") != "" {
			t.Error("a logout that could not end the grant redirected as if it had")
		}
		w = e.get(t, "/oauth2/logout?"+q.Encode()) // a program: the OAuth dialect
		wantOAuthError(t, w, http.StatusServiceUnavailable, "temporarily_unavailable")
		wantRetryAfter(t, w)
		if w.Header().Get("Location") != "" {
			t.Error("a logout that could not end the grant redirected a program as if it had")
		}
	})
	t.Run("verify page", func(t *testing.T) {
		for _, w := range []*recorder{
			e.get(t, "/oauth2/verify?auth_request_id=00000000-0000-4000-8000-000000000000"),
			e.get(t, "/v1/agent/register/"+session+"/verify"),
		} {
			wantStatus(t, w, http.StatusServiceUnavailable)
			wantRetryAfter(t, w)
		}
	})
	e.store.Down.Store(false)
	wantStatus(t, e.get(t, "/v1/agent/verify/device/down"), http.StatusOK)
}

// TestBusy: past the cap of pending logins, authorize answers 503
// temporarily_unavailable with Retry-After, and registration init the /v1 body.
func TestBusy(t *testing.T) {
	e := newEnv(t, func(o *envOptions) {
		o.maxPending = map[palm.Purpose]int{palm.PurposeLogin: 1, palm.PurposeAgentRegistration: 1}
	})
	e.authorize(t, authorizeQuery())
	w := e.get(t, "/oauth2/authorize?"+authorizeQuery().Encode())
	wantOAuthError(t, w, http.StatusServiceUnavailable, "temporarily_unavailable")
	wantRetryAfter(t, w)

	wantStatus(t, e.postJSON(t, "/v1/agent/register/init", newAgent("busy1").registration(e.clock.Now())), http.StatusCreated)
	w = e.postJSON(t, "/v1/agent/register/init", newAgent("busy2").registration(e.clock.Now()))
	wantV1Error(t, w, http.StatusServiceUnavailable, "too_many_pending_requests", "")
	wantRetryAfter(t, w)
}

// TestClientGone: a request whose client went away is answered 499 (what Caddy
// logs), not as a failure of the server.
func TestClientGone(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequest(http.MethodGet, "/v1/agent/verify/device/x", nil).WithContext(ctx)
	w := httptest.NewRecorder()
	e.srv.ServeHTTP(w, r)
	if w.Code != 499 {
		t.Errorf("status = %d, want 499; body %s", w.Code, w.Body)
	}
}

// TestOwnsPath: the Caddy handler hands palmgate /v1, /oauth2, /portal and
// /health and what is under them (unknown ones answer palmgate's 404), nothing
// else.
func TestOwnsPath(t *testing.T) {
	for p, want := range map[string]bool{
		"/v1": true, "/v1/agent/register/init": true, "/oauth2/token": true, "/portal": true, "/portal/apps": true,
		"/": false, "/v10": false, "/oauth2x/token": false, "/app/v1/x": false,
		"/health/alive": true, "/health/ready": true, "/health": true, "/health/other": true, "/healthz": false, "/healthy/x": false,
	} {
		if got := edge.OwnsPath(p); got != want {
			t.Errorf("OwnsPath(%q) = %v, want %v", p, got, want)
		}
	}
}

// TestJSONBodyFraming: a /v1 JSON body is read whole and as declared. The
// Content-Type may carry parameters; another media type is 415. A body that
// ends before its Content-Length, or goes on past it, is 400 invalid_body;
// a body of undeclared length is read to its end.
func TestJSONBodyFraming(t *testing.T) {
	e := newEnv(t)
	serve := func(contentType, body string, declared int64) *httptest.ResponseRecorder {
		t.Helper()
		r := httptest.NewRequest(http.MethodPost, "/v1/agent/verify/signature", strings.NewReader(body))
		r.Header.Set("Content-Type", contentType)
		r.ContentLength = declared
		w := httptest.NewRecorder()
		e.srv.ServeHTTP(w, r)
		return w
	}
	const body = `{"publicKey":"x"}` // read and parsed: deviceId is missing
	wantV1Error(t, serve("application/json", body, int64(len(body))), http.StatusBadRequest, "missing_field", "deviceId")
	wantV1Error(t, serve("application/json; charset=utf-8", body, int64(len(body))), http.StatusBadRequest, "missing_field", "deviceId")
	wantV1Error(t, serve("Application/JSON", body, int64(len(body))), http.StatusBadRequest, "missing_field", "deviceId")
	wantV1Error(t, serve("application/json", body, -1), http.StatusBadRequest, "missing_field", "deviceId")
	wantV1Error(t, serve("text/plain", body, int64(len(body))), http.StatusUnsupportedMediaType, "unsupported_media_type", "")
	wantV1Error(t, serve("application/json", body, int64(len(body))+1), http.StatusBadRequest, "invalid_body", "")
	wantV1Error(t, serve("application/json", body+" {}", int64(len(body))), http.StatusBadRequest, "invalid_body", "")

	// The connection fails after the declared bytes, before the body's end.
	r := httptest.NewRequest(http.MethodPost, "/v1/agent/verify/signature",
		io.MultiReader(strings.NewReader(body), iotest.ErrReader(errors.New("connection reset"))))
	r.Header.Set("Content-Type", "application/json")
	r.ContentLength = int64(len(body))
	w := httptest.NewRecorder()
	e.srv.ServeHTTP(w, r)
	wantV1Error(t, w, http.StatusBadRequest, "invalid_body", "")
}
