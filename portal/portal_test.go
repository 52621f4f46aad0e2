package portal

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/internal/clocktest"
	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/memstore"
)

// clock is the settable clock of core's tests.
type clock = clocktest.Clock

func newPortal(t *testing.T, issuer string) (*Portal, *clock) {
	t.Helper()
	p, _, c := newPortalStore(t, issuer)
	return p, c
}

// newPortalStore is newPortal with its store.
func newPortalStore(t *testing.T, issuer string) (*Portal, storage.Store, *clock) {
	t.Helper()
	store := memstore.New()
	p, c := newPortalOn(t, issuer, store)
	return p, store, c
}

// newPortalOn is newPortal with its provider on store; configure changes the
// provider's configuration first.
func newPortalOn(t *testing.T, issuer string, store storage.Store, configure ...func(*oidc.Config)) (*Portal, *clock) {
	t.Helper()
	ctx := context.Background()
	ps, err := palm.NewService(palm.Config{Store: store, Issuer: issuer, Dev: true})
	if err != nil {
		t.Fatal(err)
	}
	ks, err := keys.Open(ctx, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := oidc.Config{Store: store, Palm: ps, Keys: ks, Issuer: issuer,
		Clients: []oidc.Client{StaticClient(issuer)}, PairwiseSecret: strings.Repeat("p", 32),
		AccessTTL: time.Hour, RefreshTTL: time.Hour, CodeTTL: time.Minute}
	for _, f := range configure {
		f(&cfg)
	}
	svc, err := oidc.NewService(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := clocktest.New(time.Now())
	return New(Config{OIDC: svc, Store: store, Issuer: issuer, Now: c.Now, SessionTTL: time.Hour}), c
}

// signedIn returns the session cookie of a developer signed in as humanID.
func signedIn(p *Portal, humanID string) *http.Cookie {
	rec := httptest.NewRecorder()
	if err := p.startSession(context.Background(), rec, httptest.NewRequest(http.MethodGet, "/portal/callback", nil), humanID); err != nil {
		panic(err)
	}
	return rec.Result().Cookies()[0]
}

// browserAccept is the Accept header of a browser's navigation (Chromium's).
const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8"

func serve(p *Portal, method, path string, form url.Values, cookies ...*http.Cookie) *httptest.ResponseRecorder {
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	req := httptest.NewRequest(method, path, body)
	req.Header.Set("Accept", browserAccept) // the portal is browsed; apierrors_test.go asks as a program
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, req)
	return rec
}

func TestSessionCookie(t *testing.T) {
	p, c := newPortal(t, "https://id.example.test")
	cookie := signedIn(p, "human-1")
	if cookie.Name != "__Host-palmgate_portal" || !cookie.Secure || !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode || cookie.Path != "/" || cookie.MaxAge != 3600 {
		t.Errorf("session cookie on https: %+v", cookie)
	}
	if r := serve(p, "GET", "/portal", nil, cookie); !strings.Contains(r.Body.String(), `id="create"`) {
		t.Fatalf("signed in: %d %s", r.Code, r.Body)
	}
	// A changed cookie is no session.
	forged := *cookie
	forged.Value = strings.Replace(cookie.Value, cookie.Value[2:6], "AAAA", 1)
	if r := serve(p, "GET", "/portal", nil, &forged); strings.Contains(r.Body.String(), `id="create"`) {
		t.Error("a changed session cookie is accepted")
	}
	// The session expires.
	c.Advance(time.Hour)
	if r := serve(p, "GET", "/portal", nil, cookie); strings.Contains(r.Body.String(), `id="create"`) {
		t.Error("the session outlives its SessionTTL")
	}
	if r := serve(p, "POST", "/portal/apps", url.Values{"name": {"x"}}, cookie); r.Code != http.StatusUnauthorized {
		t.Errorf("POST with an expired session: %d, want 401", r.Code)
	}
}

func TestCSRFTiedToSession(t *testing.T) {
	p, _ := newPortal(t, "http://127.0.0.1:8080")
	a, b := signedIn(p, "human-a"), signedIn(p, "human-a")
	if a.Name != "palmgate_portal" || a.Secure {
		t.Errorf("session cookie on http: %+v", a)
	}
	var sa, sb session
	p.open("session", a.Value, &sa)
	p.open("session", b.Value, &sb)
	if p.csrfToken(&sa) == p.csrfToken(&sb) {
		t.Fatal("two sessions of one developer share a CSRF token")
	}
	form := url.Values{"name": {"App"}, "redirect_uris": {"https://app.example/cb"}, "csrf": {p.csrfToken(&sb)}}
	if r := serve(p, "POST", "/portal/apps", form, a); r.Code != http.StatusForbidden {
		t.Errorf("another session's CSRF token: %d, want 403", r.Code)
	}
	form.Set("csrf", p.csrfToken(&sa))
	if r := serve(p, "POST", "/portal/apps", form, a); r.Code != http.StatusOK || !strings.Contains(r.Body.String(), `id="secret"`) {
		t.Errorf("the session's own CSRF token: %d %s", r.Code, r.Body)
	}
}

// TestLoginStateOutlivesTheProvidersLogin: the sign-in's state lasts as long as
// the provider lets a login take (login_ttl, then the code's life), however long
// the operator made that, so the portal does not refuse a callback the provider
// would still answer; and it does expire.
func TestLoginStateOutlivesTheProvidersLogin(t *testing.T) {
	for _, loginTTL := range []time.Duration{0, 40 * time.Minute} {
		p, c := newPortalOn(t, "http://127.0.0.1:8080", memstore.New(), func(cfg *oidc.Config) { cfg.LoginTTL = loginTTL })
		window := p.oidc.LoginWindow()
		if min := max(loginTTL, oidc.DefaultLoginTTL) + time.Minute; window < min {
			t.Fatalf("login_ttl %s: the provider's login window is %s, want at least %s", loginTTL, window, min)
		}
		rec := httptest.NewRecorder()
		p.login(rec, httptest.NewRequest("GET", "/portal/login", nil))
		cookie := rec.Result().Cookies()[0]
		if cookie.MaxAge < int(window.Seconds()) {
			t.Errorf("login_ttl %s: the login cookie lives %d s, less than the provider's login window %s", loginTTL, cookie.MaxAge, window)
		}
		var st loginState
		p.open("login", cookie.Value, &st)
		// A callback whose code the provider does not know: refused for its
		// code while the state lives, for taking too long after.
		callback := func() string {
			return serve(p, "GET", "/portal/callback?code=unknown&state="+st.State, nil, cookie).Body.String()
		}
		c.Advance(window)
		if body := callback(); strings.Contains(body, "took too long") || !strings.Contains(body, "could not be completed") {
			t.Errorf("login_ttl %s: a callback at the end of the provider's login window: %s", loginTTL, body)
		}
		c.Advance(2 * time.Minute)
		if body := callback(); !strings.Contains(body, "took too long") {
			t.Errorf("login_ttl %s: the login state outlives the provider's login window by two minutes: %s", loginTTL, body)
		}
	}
}

func TestCallbackRefusesAnotherBrowsersState(t *testing.T) {
	p, _ := newPortal(t, "http://127.0.0.1:8080")
	rec := httptest.NewRecorder()
	p.login(rec, httptest.NewRequest("GET", "/portal/login", nil))
	login := rec.Result().Cookies()[0]
	if r := serve(p, "GET", "/portal/callback?code=x&state=wrong", nil, login); r.Code != http.StatusBadRequest {
		t.Errorf("a callback with another state: %d, want 400", r.Code)
	}
	var st loginState
	p.open("login", login.Value, &st)
	if r := serve(p, "GET", "/portal/callback?code=unknown&state="+st.State, nil, login); r.Code != http.StatusBadRequest {
		t.Errorf("a callback with an unknown code: %d, want 400", r.Code)
	}
}

func TestErrorsArePages(t *testing.T) {
	p, _ := newPortal(t, "http://127.0.0.1:8080")
	cookie := signedIn(p, "human-1")
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"PUT", "/portal", http.StatusMethodNotAllowed},
		{"DELETE", "/portal/apps/pg_AAAAAAAAAAAAAAAAAAAAAA", http.StatusMethodNotAllowed},
		{"GET", "/portal/apps/pg_AAAAAAAAAAAAAAAAAAAAAA", http.StatusNotFound},
		{"GET", "/portal/apps/palmgate-portal", http.StatusNotFound},
		{"GET", "/portal/nothing", http.StatusNotFound},
	} {
		r := serve(p, tc.method, tc.path, nil, cookie)
		if r.Code != tc.status || !strings.HasPrefix(r.Header().Get("Content-Type"), "text/html") || !strings.Contains(r.Body.String(), `id="error"`) {
			t.Errorf("%s %s: %d %s, want %d with an error page", tc.method, tc.path, r.Code, r.Header().Get("Content-Type"), tc.status)
		}
	}
}
