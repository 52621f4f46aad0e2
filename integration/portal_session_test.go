package integration

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/internal/pgtest"
	"github.com/palmgate/palmgate/internal/testserver"
)

// sessionCookie is the developer's portal session cookie, as their browser holds it.
func (d *portalDev) sessionCookie(t *testing.T) string {
	t.Helper()
	u, _ := url.Parse(d.e.URL + "/portal")
	for _, c := range d.c.Jar.Cookies(u) {
		if c.Name == "palmgate_portal" {
			return c.Value
		}
	}
	t.Fatal("no palmgate_portal cookie in the developer's browser")
	return ""
}

// expectPortalRefused: at e, a saved copy of a session cookie is no session: the
// home page is the signed-out one and a form posted with the session's CSRF token
// is refused (401) and creates nothing.
func expectPortalRefused(t *testing.T, e *env, cookie, csrf, what string) {
	t.Helper()
	home := testserver.Do(t, "GET", e.URL+"/portal", nil, "Cookie", "palmgate_portal="+cookie)
	if home.Status != http.StatusOK || strings.Contains(string(home.Body), `id="create"`) {
		t.Errorf("%s: GET /portal answers %d signed in, want the signed-out page", what, home.Status)
	}
	name := "After sign-out " + randHex(4)
	form := url.Values{"csrf": {csrf}, "name": {name}, "redirect_uris": {"https://signed-out.example/cb"}}
	r := testserver.Do(t, "POST", e.URL+"/portal/apps", form.Encode(), "Cookie", "palmgate_portal="+cookie,
		"Content-Type", "application/x-www-form-urlencoded")
	if r.Status != http.StatusUnauthorized {
		t.Errorf("%s: a form with the session's CSRF token answers %d, want 401", what, r.Status)
	}
	if list := e.cli(t, "list"); strings.Contains(list, name) {
		t.Errorf("%s: a refused form created an application:\n%s", what, list)
	}
}

// expectPortalSignedIn: at e, cookie is a live session.
func expectPortalSignedIn(t *testing.T, e *env, cookie, what string) {
	t.Helper()
	home := testserver.Do(t, "GET", e.URL+"/portal", nil, "Cookie", "palmgate_portal="+cookie)
	if home.Status != http.StatusOK || !strings.Contains(string(home.Body), `id="create"`) {
		t.Errorf("%s: GET /portal answers %d signed out, want the signed-in page", what, home.Status)
	}
}

// ownerOf is the owner the admin API shows on application id: its developer.
func (e *env) ownerOf(t *testing.T, id string) string {
	t.Helper()
	var c struct {
		Owner string `json:"owner"`
	}
	e.cliJSON(t, &c, "show", id)
	if c.Owner == "" {
		t.Fatalf("the admin API shows no owner on the portal's application %s", id)
	}
	return c.Owner
}

// endSessions runs `caddy palmgate portal end-sessions <owner>` against e.
func (e *env) endSessions(t *testing.T, owner string, args ...string) (string, error) {
	t.Helper()
	return e.RunCommand(t, append([]string{"palmgate", "portal", "end-sessions", owner, "--address", e.AdminAddr}, args...)...)
}

// TestPortalSignOut: after POST /portal/logout, a saved copy of the session cookie
// and its CSRF token are refused; an operator ends a developer's sessions with the
// CLI (both of their browsers), no other developer's; the admin route refuses bad
// requests with a 4xx.
func TestPortalSignOut(t *testing.T) {
	t.Parallel()
	e := startOIDC(t, nil)
	alice := e.portalSignIn(t, e.subject("alice-signout"))
	cookie, csrf := alice.sessionCookie(t), alice.csrf(t)
	expectPortalSignedIn(t, e, cookie, "the saved cookie before sign-out")
	if r := alice.post(t, "/portal/logout", url.Values{"csrf": {csrf}}); r.Status != http.StatusSeeOther {
		t.Fatalf("sign out: %d %s", r.Status, testserver.Snippet(r.Body))
	}
	expectPortalRefused(t, e, cookie, csrf, "the saved cookie after sign-out")

	// The operator ends all of bob's sessions, not carol's.
	subject := e.subject("bob-ended")
	bob, bobPhone, carol := e.portalSignIn(t, subject), e.portalSignIn(t, subject), e.portalSignIn(t, e.subject("carol-kept"))
	id, _ := bob.create(t, "Bob's App", "https://bob.example/cb")
	owner := e.ownerOf(t, id)
	bobCookie, bobCSRF, phoneCookie, phoneCSRF := bob.sessionCookie(t), bob.csrf(t), bobPhone.sessionCookie(t), bobPhone.csrf(t)
	out, err := e.endSessions(t, owner)
	if err != nil || !strings.Contains(out, "ended 2 portal session(s) of "+owner) {
		t.Fatalf("caddy palmgate portal end-sessions: %v\n%s", err, out)
	}
	expectPortalRefused(t, e, bobCookie, bobCSRF, "bob's browser after end-sessions")
	expectPortalRefused(t, e, phoneCookie, phoneCSRF, "bob's other browser after end-sessions")
	expectPortalSignedIn(t, e, carol.sessionCookie(t), "another developer after end-sessions")
	if !strings.Contains(e.cli(t, "list"), id) {
		t.Error("ending the developer's sessions removed their application")
	}
	out, err = e.endSessions(t, owner, "--json")
	if err != nil || strings.TrimSpace(out) != fmt.Sprintf(`{"owner":%q,"ended":0}`, owner) {
		t.Errorf("end-sessions --json again: %v\n%s", err, out)
	}
	if out, err := e.endSessions(t, "not-a-developer"); err == nil || !strings.Contains(out, "owner") {
		t.Errorf("end-sessions with a malformed owner: %v, want a refusal naming the owner\n%s", err, out)
	}

	admin := "http://" + e.AdminAddr + "/palmgate/portal/sessions/"
	for _, tc := range []struct {
		name, method, path string
		status             int
	}{
		{"malformed owner", "DELETE", "not-a-uuid", 400},
		{"upper-case owner", "DELETE", strings.ToUpper(owner), 400},
		{"no owner", "DELETE", "", 404},
		{"method", "GET", owner, 405},
	} {
		r := testserver.Do(t, tc.method, admin+tc.path, nil, "Origin", "http://"+e.AdminAddr)
		if r.Status != tc.status {
			t.Errorf("%s: %s %s answers %d %s, want %d", tc.name, tc.method, tc.path, r.Status, r.Body, tc.status)
		} else if m := r.Object(t); str(m["error"]) == "" {
			t.Errorf("%s: error body %s has no error message", tc.name, r.Body)
		}
	}
	expectPortalSignedIn(t, e, carol.sessionCookie(t), "another developer after refused requests")
}

// TestPortalSignOutAcrossInstancesPostgres: two servers on one PostgreSQL
// database; a sign-out at one refuses the saved cookie at the other at once, and
// an operator's end-sessions at one ends the sessions that the other started.
func TestPortalSignOutAcrossInstancesPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	storage := fmt.Sprintf("storage postgres %q", dsn)
	a := start(t, testserver.Options{Global: "rate_limit off", Storage: storage})
	b := start(t, testserver.Options{Global: "rate_limit off", Storage: storage})

	alice := a.portalSignIn(t, a.subject("alice-pg"))
	cookie, csrf := alice.sessionCookie(t), alice.csrf(t)
	expectPortalSignedIn(t, b, cookie, "a session of A at B")
	if r := alice.post(t, "/portal/logout", url.Values{"csrf": {csrf}}); r.Status != http.StatusSeeOther {
		t.Fatalf("sign out at A: %d %s", r.Status, testserver.Snippet(r.Body))
	}
	expectPortalRefused(t, b, cookie, csrf, "at B, the cookie signed out at A")

	bob := b.portalSignIn(t, b.subject("bob-pg"))
	id, _ := bob.create(t, "Bob's PG App", "https://bob-pg.example/cb")
	bobCookie, bobCSRF := bob.sessionCookie(t), bob.csrf(t)
	expectPortalSignedIn(t, a, bobCookie, "a session of B at A")
	if out, err := a.endSessions(t, a.ownerOf(t, id)); err != nil || !strings.Contains(out, "ended 1 ") {
		t.Fatalf("end-sessions at A: %v\n%s", err, out)
	}
	expectPortalRefused(t, b, bobCookie, bobCSRF, "at B, a session A's operator ended")
	expectPortalRefused(t, a, bobCookie, bobCSRF, "at A, a session A's operator ended")
}
