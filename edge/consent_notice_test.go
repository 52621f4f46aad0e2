package edge_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/core/palm"
)

// TestConsentPageMarksDeveloperClients checks that the SSO session's consent page
// says, as the login page and the palm app do, that an application was
// registered by a developer (the portal, the admin API) or by itself, not by the
// operator. Within a session this page is all a person sees before a one-click
// Allow: no palm app screen shows the mark. An operator's own client has none.
func TestConsentPageMarksDeveloperClients(t *testing.T) {
	e := newEnv(t, withSSO(12*time.Hour))
	w := e.scanned(t, authorizeQuery(), "alice")
	wantStatus(t, w, http.StatusFound)
	sess := cookieNamed(w, "__Host-palmgate_session")
	if sess == nil {
		t.Fatal("no session cookie")
	}
	name := "Example Mail"
	ci, _, err := e.oidc.Clients().Create(context.Background(), oidc.ClientSpec{Name: &name, RedirectURIs: []string{testRedirect}, Owner: "dev"})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	consentPage := func(t *testing.T, clientID string) string {
		t.Helper()
		q := authorizeQuery()
		q.Set("client_id", clientID)
		q.Set("prompt", "consent")
		w := e.do(t, req{method: http.MethodGet, target: "/oauth2/authorize?" + q.Encode(), cookies: []*http.Cookie{sess}})
		wantStatus(t, w, http.StatusFound)
		loc, _ := url.Parse(w.Header().Get("Location"))
		if loc.Path != "/oauth2/consent" {
			t.Fatalf("Location %q, want the consent page", loc)
		}
		var login *http.Cookie
		for _, c := range w.Result().Cookies() {
			if strings.HasPrefix(c.Name, "__Host-palmgate_login_") {
				login = c
			}
		}
		page := e.do(t, req{method: http.MethodGet, target: loc.RequestURI(), header: http.Header{"Accept": {browserAccept}}, cookies: []*http.Cookie{sess, login}})
		wantPage(t, page, http.StatusOK, "Allow")
		return page.Body.String()
	}
	t.Run("developer's application", func(t *testing.T) {
		body := consentPage(t, ci.ID)
		if !strings.Contains(body, name) || !strings.Contains(body, `id="self-registered">`+palm.SelfRegisteredNotice+`<`) {
			t.Errorf("the consent page of a developer's application lacks %q:\n%s", palm.SelfRegisteredNotice, body)
		}
	})
	t.Run("operator's application", func(t *testing.T) {
		if body := consentPage(t, testClientID); strings.Contains(body, "self-registered") {
			t.Errorf("the consent page of the operator's application is marked:\n%s", body)
		}
	})
}
