package edge_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/palmgate/palmgate/core/palm"
)

// browserAccept is the Accept header of a browser's navigation (Chromium's).
const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8"

// wantErrorPage checks the error page a browser gets: its status, a styled page
// (the login page's look, its CSP, no-store) holding the plain-words title and the
// technical code in small print, and no JSON.
func wantErrorPage(t *testing.T, w *recorder, status int, title, code string) {
	t.Helper()
	wantPage(t, w, status, title)
	body := w.Body.String()
	if !strings.Contains(body, `class="brand"`) || !strings.Contains(body, "<main>") {
		t.Errorf("the error page is not in the pages' style:\n%s", body)
	}
	tech := body[strings.Index(body, `id="tech"`)+1:]
	if !strings.Contains(body, `id="tech"`) || !strings.Contains(tech, "<code>"+code+"</code>") {
		t.Errorf("the small print lacks the code %s:\n%s", code, body)
	}
	if strings.Contains(body, `"error":`) || strings.HasPrefix(strings.TrimSpace(body), "{") {
		t.Errorf("the page holds JSON:\n%s", body)
	}
	h := w.Header()
	if h.Get("Cache-Control") != "no-store" || !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") ||
		!strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("headers %v: want no-store and the pages' CSP", h)
	}
}

// TestErrorPagesForBrowsers: each error a person can land on answers a browser
// (Accept: text/html) with the error page, its status and plain words, and the
// same request from an API caller with the route's JSON.
func TestErrorPagesForBrowsers(t *testing.T) {
	authorize := func(change func(url.Values)) string {
		q := authorizeQuery()
		change(q)
		return "/oauth2/authorize?" + q.Encode()
	}
	for _, tc := range []struct {
		name   string
		opts   []func(*envOptions)
		setup  func(t *testing.T, e *testEnv) // requests made before the one tested
		method string
		target string
		status int
		title  string // on the page
		code   string // on the page's small print and in the JSON
		oauth  bool   // the JSON is OAuth's (else /v1's)
		// oauthCode is the OAuth JSON's error where it is not code (the mux's own
		// 404 and 405 under /oauth2: invalid_request).
		oauthCode string
	}{
		{name: "authorize, unknown client", target: authorize(func(q url.Values) { q.Set("client_id", "nobody") }),
			status: 400, title: "This application is not known here", code: "invalid_request", oauth: true},
		{name: "authorize, unregistered redirect_uri", target: authorize(func(q url.Values) { q.Set("redirect_uri", "https://evil.example.net/cb") }),
			status: 400, title: "This sign-in link is not valid", code: "invalid_request", oauth: true},
		{name: "authorize, no client_id", target: authorize(func(q url.Values) { q.Del("client_id") }),
			status: 400, title: "This request is not valid", code: "invalid_request", oauth: true},
		{name: "authorize, rate limited", opts: []func(*envOptions){withRateLimit(1)},
			setup:  func(t *testing.T, e *testEnv) { e.authorize(t, authorizeQuery()) },
			target: authorize(func(url.Values) {}), status: 429, title: "Too many attempts", code: "rate_limited", oauth: true},
		{name: "authorize, pending cap", opts: []func(*envOptions){func(o *envOptions) { o.maxPending = map[palm.Purpose]int{palm.PurposeLogin: 1} }},
			setup:  func(t *testing.T, e *testEnv) { e.authorize(t, authorizeQuery()) },
			target: authorize(func(url.Values) {}), status: 503, title: "Temporarily unavailable", code: "too_many_pending_requests", oauth: true},
		{name: "expired login", target: "/oauth2/verify?auth_request_id=" + uuid.NewString(),
			status: 400, title: "This sign-in has expired", code: "invalid_request", oauth: true},
		{name: "login without id", target: "/oauth2/verify",
			status: 400, title: "This sign-in has expired", code: "invalid_request", oauth: true},
		{name: "unknown agent registration", target: "/v1/agent/register/" + uuid.NewString() + "/verify",
			status: 404, title: "This registration link is not valid", code: "session_not_found"},
		{name: "scan URL with a wrong nonce", target: "/v1/palm/challenges/" + uuid.NewString() + "?nonce=x",
			status: 404, title: "This palm scan link is not valid", code: "challenge_not_found"},
		{name: "unknown path under /oauth2", target: "/oauth2/nope", status: 404, title: "Page not found", code: "not_found", oauth: true, oauthCode: "invalid_request"},
		{name: "unknown path under /v1", target: "/v1/nope", status: 404, title: "Page not found", code: "not_found"},
		{name: "/v1 itself", target: "/v1", status: 404, title: "Page not found", code: "not_found"},
		{name: "unknown path under /health", target: "/health/nope", status: 404, title: "Page not found", code: "not_found"},
		{name: "/health itself", target: "/health", status: 404, title: "Page not found", code: "not_found"},
		{name: "the portal, off", target: "/portal/x", status: 404, title: "Page not found", code: "not_found"},
		{name: "dot segments", target: "/v1/x/../../oauth2/jwks", status: 404, title: "Page not found", code: "not_found"},
		{name: "a method the path does not serve", method: http.MethodDelete, target: "/oauth2/verify",
			status: 405, title: "This page cannot be used this way", code: "method_not_allowed", oauth: true, oauthCode: "invalid_request"},
		{name: "a method a /v1 path does not serve", method: http.MethodDelete, target: "/v1/human/agents",
			status: 405, title: "This page cannot be used this way", code: "method_not_allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = http.MethodGet
			}
			for _, accept := range []string{browserAccept, "application/json"} {
				e := newEnv(t, tc.opts...)
				if tc.setup != nil {
					tc.setup(t, e)
				}
				w := e.do(t, req{method: method, target: tc.target, header: http.Header{"Accept": {accept}}})
				if accept == browserAccept {
					wantErrorPage(t, w, tc.status, tc.title, tc.code)
				} else if tc.oauth && tc.oauthCode != "" {
					wantOAuthError(t, w, tc.status, tc.oauthCode)
				} else if tc.oauth {
					wantOAuthError(t, w, tc.status, map[bool]string{true: "temporarily_unavailable", false: tc.code}[tc.status == 429 || tc.status == 503])
				} else {
					wantV1Error(t, w, tc.status, tc.code, "")
				}
				if tc.status == 429 || tc.status == 503 {
					wantRetryAfter(t, w)
				}
			}
		})
	}
}

// TestErrorPageLoginAnswered: the login page of a request already answered (a
// code is issued once) tells the person the sign-in is finished.
func TestErrorPageLoginAnswered(t *testing.T) {
	e := newEnv(t)
	l := e.authorize(t, authorizeQuery())
	id, nonce := e.challenge(t, l)
	e.devScan(t, id, nonce, "alice")
	target := "/oauth2/verify?auth_request_id=" + l.id
	wantStatus(t, e.do(t, req{method: http.MethodGet, target: target, cookies: []*http.Cookie{l.cookie}}), http.StatusFound)
	w := e.do(t, req{method: http.MethodGet, target: target, cookies: []*http.Cookie{l.cookie}, header: http.Header{"Accept": {browserAccept}}})
	wantErrorPage(t, w, http.StatusBadRequest, "This sign-in is already finished", "invalid_request")
}

// TestErrorPageAuthorizeRedirectsStill: once the client and its redirect_uri are
// valid, a browser's refused request still goes back to the client (a redirect
// with the error), never to a page.
func TestErrorPageAuthorizeRedirectsStill(t *testing.T) {
	e := newEnv(t)
	q := authorizeQuery()
	q.Set("scope", "openid nope")
	w := e.do(t, req{method: http.MethodGet, target: "/oauth2/authorize?" + q.Encode(), header: http.Header{"Accept": {browserAccept}}})
	wantStatus(t, w, http.StatusFound)
	loc, err := url.Parse(w.Header().Get("Location"))
	if err != nil || !strings.HasPrefix(loc.String(), testRedirect+"?") || loc.Query().Get("error") != "invalid_scope" || loc.Query().Get("state") != "st-123" {
		t.Errorf("Location %q: want invalid_scope and the state at the redirect_uri", w.Header().Get("Location"))
	}
}

// TestLogoutErrorPageSpeaksPlainly: a refused logout shows the person plain
// words; the protocol's terms (post_logout_redirect_uri) appear only in the
// small print, for the developer.
func TestLogoutErrorPageSpeaksPlainly(t *testing.T) {
	e := newEnv(t)
	q := url.Values{"client_id": {testClientID}, "post_logout_redirect_uri": {"https://evil.example.net/out"}}
	w := e.do(t, req{method: http.MethodGet, target: "/oauth2/logout?" + q.Encode(), header: http.Header{"Accept": {browserAccept}}})
	wantErrorPage(t, w, http.StatusBadRequest, "Sign-out refused", "invalid_request")
	body := w.Body.String()
	plain, tech, _ := strings.Cut(body, `id="tech"`)
	for _, word := range []string{"post_logout_redirect_uri", "id_token_hint", "client_id", "invalid_request"} {
		if strings.Contains(plain[strings.Index(plain, "<body>"):], word) {
			t.Errorf("the plain words show %q:\n%s", word, plain)
		}
	}
	if !strings.Contains(tech, "post_logout_redirect_uri is not registered") {
		t.Errorf("the small print lacks the protocol's text:\n%s", body)
	}
}

// TestLogoutRefusalToPrograms: a program (Accept application/json, */* or none)
// gets a refused logout in the OAuth dialect, not the page; a browser still gets
// the page.
func TestLogoutRefusalToPrograms(t *testing.T) {
	e := newEnv(t)
	q := url.Values{"client_id": {testClientID}, "post_logout_redirect_uri": {"https://evil.example.net/out"}}
	for _, accept := range []string{"application/json", "*/*", ""} {
		w := e.do(t, req{method: http.MethodGet, target: "/oauth2/logout?" + q.Encode(), header: http.Header{"Accept": {accept}}})
		if m := wantOAuthError(t, w, http.StatusBadRequest, "invalid_request"); !strings.Contains(fmt.Sprint(m["error_description"]), "post_logout_redirect_uri") {
			t.Errorf("Accept %q: the description does not say what was refused: %v", accept, m)
		}
		if w.Header().Get("Location") != "" {
			t.Errorf("Accept %q: a refused logout redirects to %q", accept, w.Header().Get("Location"))
		}
	}
	w := e.do(t, req{method: http.MethodGet, target: "/oauth2/logout?" + q.Encode(), header: http.Header{"Accept": {browserAccept}}})
	wantErrorPage(t, w, http.StatusBadRequest, "Sign-out refused", "invalid_request")
}

// TestPalmAppPage: a scan URL opened in a phone's browser (no palm app) answers
// a page that says what the app is, with the operator's link to get it (or a
// neutral text), and shows nothing of the challenge; the app, which asks for JSON
// or sends no Accept, still gets the challenge.
func TestPalmAppPage(t *testing.T) {
	for _, appURL := range []string{"https://apps.example.com/palm", ""} {
		t.Run("palm_app_url="+appURL, func(t *testing.T) {
			e := newEnv(t, func(o *envOptions) { o.palmAppURL = appURL })
			l := e.authorize(t, authorizeQuery())
			id, nonce := e.challenge(t, l)
			scan := "/v1/palm/challenges/" + id + "?nonce=" + url.QueryEscape(nonce)
			w := e.do(t, req{method: http.MethodGet, target: scan, header: http.Header{"Accept": {browserAccept}, "User-Agent": {testPhoneAgent}}})
			wantPage(t, w, http.StatusOK, "Open this in your palm app")
			body := w.Body.String()
			for _, secret := range []string{nonce, id, "Example App", `"status"`} {
				if strings.Contains(body, secret) {
					t.Errorf("the page shows %q:\n%s", secret, body)
				}
			}
			if appURL != "" && !strings.Contains(body, `href="`+appURL+`"`) {
				t.Errorf("the page does not link to palm_app_url:\n%s", body)
			}
			if appURL == "" && (strings.Contains(body, "href=") || !strings.Contains(body, "Ask the service that sent you here")) {
				t.Errorf("without palm_app_url the page should say so in neutral words, with no link:\n%s", body)
			}
			for _, accept := range []string{"application/json", "", "*/*"} {
				w := e.do(t, req{method: http.MethodGet, target: scan, header: http.Header{"Accept": {accept}}})
				wantStatus(t, w, http.StatusOK)
				if m := decode(t, w); m["status"] != "pending" || m["challengeId"] != id {
					t.Errorf("Accept %q: the app's JSON is %s", accept, w.Body)
				}
			}
		})
	}
}
