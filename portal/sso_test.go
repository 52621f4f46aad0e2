package portal

import (
	"net/http/httptest"
	"net/url"
	"testing"
)

// TestLoginAsksForAScan: the portal's sign-in asks for a new palm scan even within
// a single sign-on session (issue 21): it manages client secrets.
func TestLoginAsksForAScan(t *testing.T) {
	p, _ := newPortal(t, "http://127.0.0.1:8080")
	rec := httptest.NewRecorder()
	p.login(rec, httptest.NewRequest("GET", "/portal/login", nil))
	loc, err := url.Parse(rec.Header().Get("Location"))
	if err != nil || loc.Path != "/oauth2/authorize" || loc.Query().Get("prompt") != "login" {
		t.Errorf("portal sign-in Location %q, want /oauth2/authorize with prompt=login", rec.Header().Get("Location"))
	}
}
