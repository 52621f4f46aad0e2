package integration

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/palmgate/palmgate/internal/testserver"
)

// TestPortal drives the developer portal over HTTP, as a browser's forms do:
// sign in with a palm scan, create an application, log a user in to it with
// go-oidc, rotate its secret, edit its redirect URIs, delete it; another
// developer can neither see nor change it, and a form without its CSRF token is
// refused.
func TestPortal(t *testing.T) {
	t.Parallel()
	e := startOIDC(t, nil, "portal {\nmax_applications 2\n}")
	alice := e.portalSignIn(t, e.subject("alice-dev"))
	redirect, other := "https://portal-app.example/callback", "https://portal-app.example/other"

	// A form without its CSRF token, or with a wrong one, is refused.
	form := url.Values{"name": {"No CSRF"}, "redirect_uris": {redirect}}
	if r := alice.post(t, "/portal/apps", form); r.Status != http.StatusForbidden || !strings.Contains(string(r.Body), "CSRF") {
		t.Errorf("create without a CSRF token: %d, want 403", r.Status)
	}
	form.Set("csrf", "AAAA"+alice.csrf(t)[4:])
	if r := alice.post(t, "/portal/apps", form); r.Status != http.StatusForbidden {
		t.Errorf("create with a wrong CSRF token: %d, want 403", r.Status)
	}
	if strings.Contains(string(alice.get(t, "/portal").Body), "No CSRF") {
		t.Fatal("a refused form created an application")
	}

	id, secret := alice.create(t, "Alice App", redirect, other)
	page := string(alice.get(t, "/portal/apps/"+id).Body)
	for _, want := range []string{id, e.URL + "/oauth2", "/.well-known/openid-configuration", `&#34;client-id&#34;, &#34;` + id + `&#34;`, "palmgate_bearer", "Authlib", "openid-client"} {
		if !strings.Contains(page, want) {
			t.Errorf("application page lacks %q", want)
		}
	}
	if strings.Contains(page, secret) {
		t.Error("the secret is shown again after creation")
	}

	// A user logs in to the new application with go-oidc and x/oauth2.
	rp := newRelyingParty(t, e, oidcClient{id: id, secret: secret, redirects: []string{redirect}}, oauth2.AuthStyleInParams, "openid", "offline_access")
	l := rp.login(t, e, e.subject("portal-user"))
	tok, err := rp.conf.Exchange(rp.ctx, l.code, oauth2.VerifierOption(l.verifier))
	if err != nil {
		t.Fatalf("exchanging a code of the portal's application: %v", err)
	}
	if tok.RefreshToken == "" {
		t.Fatal("no refresh token")
	}

	// Another developer sees and changes nothing of it, by URL guessing too.
	bob := e.portalSignIn(t, e.subject("bob-dev"))
	bobCSRF := bob.csrf(t)
	if strings.Contains(string(bob.get(t, "/portal").Body), id) {
		t.Error("another developer's list shows the application")
	}
	for _, tc := range []struct{ method, path string }{
		{"GET", "/portal/apps/" + id}, {"POST", "/portal/apps/" + id}, {"POST", "/portal/apps/" + id + "/rotate"}, {"POST", "/portal/apps/" + id + "/delete"},
	} {
		var r *testserver.Response
		if tc.method == "GET" {
			r = bob.get(t, tc.path)
		} else {
			r = bob.post(t, tc.path, url.Values{"csrf": {bobCSRF}, "name": {"Hijacked"}, "redirect_uris": {"https://evil.example/cb"}})
		}
		if r.Status != http.StatusNotFound || strings.Contains(string(r.Body), "Alice App") {
			t.Errorf("bob %s %s: %d, want 404 revealing nothing", tc.method, tc.path, r.Status)
		}
	}
	// Bob's token is not Alice's: CSRF tokens are tied to the session.
	if r := alice.post(t, "/portal/apps/"+id+"/delete", url.Values{"csrf": {bobCSRF}}); r.Status != http.StatusForbidden {
		t.Errorf("alice's delete with bob's CSRF token: %d, want 403", r.Status)
	}
	if !e.authenticates(t, id, secret) {
		t.Fatal("the application was changed by refused requests")
	}

	// Rotate with a 10 s grace (long enough for the checks within it on a loaded
	// machine): the old secret works, then stops.
	r := alice.post(t, "/portal/apps/"+id+"/rotate", url.Values{"csrf": {alice.csrf(t)}, "grace": {"10s"}})
	if r.Status != http.StatusOK {
		t.Fatalf("rotate: %d %s", r.Status, testserver.Snippet(r.Body))
	}
	_, fresh := pageClient(t, r.Body)
	if fresh == secret || !e.authenticates(t, id, secret) || !e.authenticates(t, id, fresh) {
		t.Fatal("after rotation both secrets must work within the grace period")
	}
	waitUntil(t, 20*time.Second, "the rotated-out secret stops after its grace period", func() bool { return !e.authenticates(t, id, secret) })
	rp.conf.ClientSecret = fresh

	// Edit: the removed redirect URI is refused at once.
	r = alice.post(t, "/portal/apps/"+id, url.Values{"csrf": {alice.csrf(t)}, "name": {"Alice App 2"}, "redirect_uris": {other}})
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), "Alice App 2") {
		t.Fatalf("edit: %d %s", r.Status, testserver.Snippet(r.Body))
	}
	expectOAuthError(t, e.do(t, "GET", rp.conf.AuthCodeURL("st"), nil), http.StatusBadRequest, "invalid_request")

	// Bad input: a clear 4xx page.
	for _, tc := range []struct {
		name, uris string
		status     int
	}{
		{"", redirect, 400}, {strings.Repeat("n", 101), redirect, 400}, {"x", "https://a.example/cb#frag", 400},
		{"x", "not a url", 400}, {"x", "", 400},
	} {
		r := alice.post(t, "/portal/apps", url.Values{"csrf": {alice.csrf(t)}, "name": {tc.name}, "redirect_uris": {tc.uris}})
		if r.Status != tc.status || !strings.Contains(string(r.Body), `id="form-error"`) || !strings.Contains(string(r.Body), `id="create"`) {
			t.Errorf("create %q %q: %d, want %d with the form and its error message", tc.name, tc.uris, r.Status, tc.status)
		}
	}
	// The limit: max_applications 2.
	alice.create(t, "Second App", redirect)
	if r := alice.post(t, "/portal/apps", url.Values{"csrf": {alice.csrf(t)}, "name": {"Third"}, "redirect_uris": {redirect}}); r.Status != http.StatusConflict {
		t.Errorf("a third application: %d, want 409", r.Status)
	}

	// Delete: without the CSRF token refused; with it the application and its
	// grants are gone.
	if r := alice.post(t, "/portal/apps/"+id+"/delete", url.Values{}); r.Status != http.StatusForbidden {
		t.Errorf("delete without a CSRF token: %d, want 403", r.Status)
	}
	if r := alice.post(t, "/portal/apps/"+id+"/delete", url.Values{"csrf": {alice.csrf(t)}}); r.Status != http.StatusSeeOther {
		t.Fatalf("delete: %d %s", r.Status, testserver.Snippet(r.Body))
	}
	if alice.get(t, "/portal/apps/"+id).Status != http.StatusNotFound {
		t.Error("the deleted application's page still answers")
	}
	e.expectRevoked(t, tok.AccessToken)
	_, err = rp.forceRefresh(tok.RefreshToken)
	expectRetrieveError(t, err, http.StatusUnauthorized, "invalid_client")

	// Signing out ends the session; a forged session cookie is no session.
	if r := alice.post(t, "/portal/logout", url.Values{"csrf": {alice.csrf(t)}}); r.Status != http.StatusSeeOther {
		t.Errorf("sign out: %d", r.Status)
	}
	if strings.Contains(string(alice.get(t, "/portal").Body), `id="create"`) {
		t.Error("still signed in after signing out")
	}
	forged := testserver.Do(t, "GET", e.URL+"/portal", nil, "Cookie", "palmgate_portal=eyJoIjoieCIsInMiOiJ5IiwiZSI6OTk5OTk5OTk5OX0.AAAA")
	if strings.Contains(string(forged.Body), `id="create"`) {
		t.Error("a forged session cookie is accepted")
	}
	if r := testserver.Do(t, "GET", e.URL+"/portal/nothing-here", nil); r.Status != http.StatusNotFound {
		t.Errorf("unknown portal page: %d", r.Status)
	}
	if r := testserver.Do(t, "GET", e.URL+"/portal/callback?code=x&state=y", nil); r.Status != http.StatusBadRequest {
		t.Errorf("a callback this browser did not start: %d, want 400", r.Status)
	}
}

// TestPortalOff: `portal off` removes the portal and its client; the portal's
// client id cannot be configured.
func TestPortalOff(t *testing.T) {
	t.Parallel()
	e := startOIDC(t, nil, "portal off")
	for _, p := range []string{"/portal", "/portal/", "/portal/login"} {
		if r := testserver.Do(t, "GET", e.URL+p, nil); r.Status != http.StatusNotFound {
			t.Errorf("%s with portal off: %d, want 404", p, r.Status)
		}
	}
	q := url.Values{"response_type": {"code"}, "client_id": {"palmgate-portal"}, "redirect_uri": {e.URL + "/portal/callback"}, "scope": {"openid"}}
	expectOAuthError(t, e.do(t, "GET", "/oauth2/authorize?"+q.Encode(), nil), http.StatusBadRequest, "invalid_request")

	out := testserver.StartExpectFailure(t, testserver.Options{Global: "client palmgate-portal {\nsecret s\nredirect_uri https://a.example/cb\n}"})
	if !strings.Contains(out, "reserved for the developer portal") {
		t.Errorf("configuring the portal's client id: want a clear refusal, got:\n%s", out)
	}
}
