package portal

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// TestPublicApp (issue 21): the create form declares a public application: no
// secret is shown, the page says it is public with its allowed origins (its
// redirect URI's and the extra ones), and it has no rotation form; a bad origin
// is a 400 page naming it. A confidential application still gets its secret.
func TestPublicApp(t *testing.T) {
	p, _ := newPortal(t, "http://127.0.0.1:8080")
	cookie := signedIn(p, "human-1")
	var s session
	p.open("session", cookie.Value, &s)
	csrf := p.csrfToken(&s)
	form := url.Values{"csrf": {csrf}, "name": {"Web App"}, "redirect_uris": {"https://spa.example/callback"},
		"public": {"on"}, "allowed_origins": {"https://preview.spa.example\r\n"}}
	r := serve(p, "POST", "/portal/apps", form, cookie)
	body := r.Body.String()
	if r.Code != http.StatusOK || strings.Contains(body, `id="secret"`) || strings.Contains(body, `id="rotate"`) ||
		!strings.Contains(body, `id="auth-method">public`) ||
		!strings.Contains(body, `id="allowed-origins">https://preview.spa.example https://spa.example<`) {
		t.Fatalf("create a public app: %d\n%s", r.Code, body)
	}
	id := regexp.MustCompile(`id="client-id">([^<]+)<`).FindStringSubmatch(body)[1]
	// An edit keeps it public and its origins (the edit form has no such field).
	form = url.Values{"csrf": {csrf}, "name": {"Web App 2"}, "redirect_uris": {"https://spa.example/callback"}}
	r = serve(p, "POST", "/portal/apps/"+id, form, cookie)
	if body := r.Body.String(); r.Code != http.StatusOK || !strings.Contains(body, `id="allowed-origins">https://preview.spa.example https://spa.example<`) {
		t.Errorf("edit of a public app: %d\n%s", r.Code, body)
	}
	form = url.Values{"csrf": {csrf}, "name": {"Server App"}, "redirect_uris": {"https://srv.example/cb"}}
	if r := serve(p, "POST", "/portal/apps", form, cookie); r.Code != http.StatusOK || !strings.Contains(r.Body.String(), `id="secret"`) {
		t.Errorf("create a confidential app: %d, want its secret shown", r.Code)
	}
	form = url.Values{"csrf": {csrf}, "name": {"Bad"}, "redirect_uris": {"https://spa.example/callback"}, "public": {"on"},
		"allowed_origins": {"*"}}
	if r := serve(p, "POST", "/portal/apps", form, cookie); r.Code != http.StatusBadRequest || !strings.Contains(r.Body.String(), "allowed_origin") {
		t.Errorf("a wildcard origin: %d, want 400 naming allowed_origin\n%s", r.Code, r.Body)
	}
}

// TestNativeApp (fourth review; RFC 8252 7.1): a public native app is created
// with its private-use scheme redirect URI and shown with it, and no web origin
// comes of it; a confidential app with one is a 400 page saying why.
func TestNativeApp(t *testing.T) {
	p, _ := newPortal(t, "http://127.0.0.1:8080")
	cookie := signedIn(p, "human-1")
	var s session
	p.open("session", cookie.Value, &s)
	csrf := p.csrfToken(&s)
	form := url.Values{"csrf": {csrf}, "name": {"Desktop App"}, "redirect_uris": {"com.example.app:/oauth2redirect"}, "public": {"on"}}
	r := serve(p, "POST", "/portal/apps", form, cookie)
	body := r.Body.String()
	if r.Code != http.StatusOK || !strings.Contains(body, "com.example.app:/oauth2redirect") || !strings.Contains(body, `id="auth-method">public`) ||
		strings.Contains(body, "com.example.app://") || !strings.Contains(body, `id="native-only"`) || strings.Contains(body, `id="figure-go"`) {
		t.Fatalf("create a native app: %d\n%s", r.Code, body)
	}
	form.Del("public")
	if r := serve(p, "POST", "/portal/apps", form, cookie); r.Code != http.StatusBadRequest || !strings.Contains(r.Body.String(), "public client") {
		t.Errorf("a confidential app with a private-use scheme: %d, want 400 saying it is for public clients\n%s", r.Code, r.Body)
	}
}
