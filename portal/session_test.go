package portal

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/storage/storagetest"
)

// Developers' humanIds, as the palm service makes them.
const (
	devA = "8f1f5d3e-7a4b-4c2d-9e6f-0a1b2c3d4e5f"
	devB = "0b7e2f64-3c1d-4a5e-8f9a-6b7c8d9e0f1a"
)

// csrfOf is the CSRF token the portal's home page shows to cookie's session.
func csrfOf(t *testing.T, p *Portal, cookie *http.Cookie) string {
	t.Helper()
	r := serve(p, "GET", "/portal", nil, cookie)
	m := strings.SplitN(r.Body.String(), `name="csrf" value="`, 2)
	if r.Code != http.StatusOK || len(m) != 2 {
		t.Fatalf("no CSRF token on /portal: %d %s", r.Code, r.Body)
	}
	return m[1][:strings.IndexByte(m[1], '"')]
}

func signedInPage(r interface{ String() string }) bool {
	return strings.Contains(r.String(), `id="create"`)
}

// expectEnded checks that cookie is no session at p: the home page is the
// signed-out one and a form posted with the session's CSRF token is refused,
// creating nothing.
func expectEnded(t *testing.T, p *Portal, cookie *http.Cookie, humanID, csrf, what string) {
	t.Helper()
	if r := serve(p, "GET", "/portal", nil, cookie); r.Code != http.StatusOK || signedInPage(r.Body) {
		t.Errorf("%s: GET /portal answers %d signed in %v, want the signed-out page", what, r.Code, signedInPage(r.Body))
	}
	if r := serve(p, "GET", "/portal/apps/pg_AAAAAAAAAAAAAAAAAAAAAA", nil, cookie); r.Code != http.StatusSeeOther {
		t.Errorf("%s: an application page answers %d, want 303 to the home page", what, r.Code)
	}
	form := url.Values{"name": {"After sign-out"}, "redirect_uris": {"https://app.example/cb"}, "csrf": {csrf}}
	if r := serve(p, "POST", "/portal/apps", form, cookie); r.Code != http.StatusUnauthorized {
		t.Errorf("%s: a form with the session's CSRF token answers %d, want 401", what, r.Code)
	}
	apps, err := p.oidc.Clients().List(context.Background(), humanID)
	if err != nil || len(apps) != 0 {
		t.Errorf("%s: the developer has %d applications (%v), want none", what, len(apps), err)
	}
}

// TestSignOutEndsSession: after POST /portal/logout a saved copy of the session
// cookie is no session, on this instance and on another one on the same store,
// and the developer's other sessions live on.
func TestSignOutEndsSession(t *testing.T) {
	p, store, _ := newPortalStore(t, "http://127.0.0.1:8080")
	other := New(Config{OIDC: p.oidc, Store: store, Issuer: p.issuer, Now: p.now}) // another instance
	cookie, phone := signedIn(p, devA), signedIn(p, devA)
	csrf := csrfOf(t, p, cookie)
	if !signedInPage(serve(other, "GET", "/portal", nil, cookie).Body) {
		t.Fatal("another instance on the store does not know the session")
	}
	r := serve(p, "POST", "/portal/logout", url.Values{"csrf": {csrf}}, cookie)
	if r.Code != http.StatusSeeOther || len(r.Result().Cookies()) != 1 || r.Result().Cookies()[0].MaxAge >= 0 {
		t.Fatalf("sign out: %d %v, want 303 dropping the cookie", r.Code, r.Result().Cookies())
	}
	expectEnded(t, p, cookie, devA, csrf, "the saved cookie after sign-out")
	expectEnded(t, other, cookie, devA, csrf, "the saved cookie at another instance")
	if r := serve(p, "POST", "/portal/logout", url.Values{"csrf": {csrf}}, cookie); r.Code != http.StatusUnauthorized {
		t.Errorf("signing out an ended session: %d, want 401", r.Code)
	}
	if !signedInPage(serve(other, "GET", "/portal", nil, phone).Body) {
		t.Error("signing out in one browser ended the developer's session in another")
	}
}

// TestEndSessions: an operator ends every session of one developer, no other's.
func TestEndSessions(t *testing.T) {
	p, store, _ := newPortalStore(t, "http://127.0.0.1:8080")
	a1, a2, b := signedIn(p, devA), signedIn(p, devA), signedIn(p, devB)
	csrf := csrfOf(t, p, a1)
	n, err := EndSessions(context.Background(), store, devA)
	if err != nil || n != 2 {
		t.Fatalf("EndSessions = %d, %v; want 2 sessions ended", n, err)
	}
	expectEnded(t, p, a1, devA, csrf, "a session the operator ended")
	expectEnded(t, p, a2, devA, csrf, "the developer's other session")
	if !signedInPage(serve(p, "GET", "/portal", nil, b).Body) {
		t.Error("ending one developer's sessions ended another's")
	}
	if n, err := EndSessions(context.Background(), store, devA); err != nil || n != 0 {
		t.Errorf("EndSessions again = %d, %v; want 0", n, err)
	}
	// The developer can sign in again.
	if !signedInPage(serve(p, "GET", "/portal", nil, signedIn(p, devA)).Body) {
		t.Error("a new sign-in after EndSessions is refused")
	}
	for _, owner := range []string{"", "x", devA + "/", "../" + devA, strings.ToUpper(devA), "{" + devA + "}", "urn:uuid:" + devA} {
		_, err := EndSessions(context.Background(), store, owner)
		f, ok := fault.As(err)
		if !errors.Is(err, ErrInvalidOwner) || !ok || f.Class != fault.Invalid {
			t.Errorf("EndSessions(%q) = %v, want an Invalid fault", owner, err)
		}
	}
	if !signedInPage(serve(p, "GET", "/portal", nil, b).Body) {
		t.Error("a refused owner ended a session")
	}
}

// TestSessionStoreDown: while the store cannot be read, a session cookie is
// neither admitted nor refused: every portal page answers 503 (a page with
// Retry-After); a sign-out that cannot be stored says so and keeps the session.
func TestSessionStoreDown(t *testing.T) {
	p, store, _ := newPortalStore(t, "http://127.0.0.1:8080")
	down := &storagetest.DownStore{Store: store}
	p.store = down
	cookie := signedIn(p, devA)
	csrf := csrfOf(t, p, cookie)
	down.Down.Store(true)
	for _, tc := range []struct {
		method, path string
		form         url.Values
	}{
		{"GET", "/portal", nil},
		{"GET", "/portal/apps/pg_AAAAAAAAAAAAAAAAAAAAAA", nil},
		{"POST", "/portal/apps", url.Values{"name": {"While down"}, "redirect_uris": {"https://app.example/cb"}, "csrf": {csrf}}},
		{"POST", "/portal/logout", url.Values{"csrf": {csrf}}},
	} {
		r := serve(p, tc.method, tc.path, tc.form, cookie)
		if r.Code != http.StatusServiceUnavailable || r.Header().Get("Retry-After") == "" || !strings.Contains(r.Body.String(), `id="error"`) || signedInPage(r.Body) {
			t.Errorf("%s %s with the store down: %d (Retry-After %q), want a 503 page", tc.method, tc.path, r.Code, r.Header().Get("Retry-After"))
		}
		if len(r.Result().Cookies()) != 0 {
			t.Errorf("%s %s with the store down changed cookies: %v", tc.method, tc.path, r.Result().Cookies())
		}
	}
	down.Down.Store(false)
	if !signedInPage(serve(p, "GET", "/portal", nil, cookie).Body) {
		t.Error("the session did not outlive the outage")
	}
	if apps, _ := p.oidc.Clients().List(context.Background(), devA); len(apps) != 0 {
		t.Errorf("a form posted while the store was down created %d applications", len(apps))
	}
}

// TestSignInAgainEndsReplacedSession: a sign-in in a browser that already holds a
// session replaces its cookie and ends the replaced session, so a copy of the old
// cookie kept elsewhere is no session either.
func TestSignInAgainEndsReplacedSession(t *testing.T) {
	p, _, _ := newPortalStore(t, "http://127.0.0.1:8080")
	old := signedIn(p, devA)
	csrf := csrfOf(t, p, old)
	req := httptest.NewRequest(http.MethodGet, "/portal/callback", nil)
	req.AddCookie(old)
	rec := httptest.NewRecorder()
	if err := p.startSession(context.Background(), rec, req, devA); err != nil {
		t.Fatal(err)
	}
	fresh := rec.Result().Cookies()[0]
	if !signedInPage(serve(p, "GET", "/portal", nil, fresh).Body) {
		t.Fatal("the new session is not signed in")
	}
	expectEnded(t, p, old, devA, csrf, "the replaced cookie")
}
