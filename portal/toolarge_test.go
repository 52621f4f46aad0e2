package portal

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestFormTooLarge (fourth review): a portal form over 64 KiB is 413 Content Too
// Large (RFC 9110 15.5.14), the portal's page to a browser and {"error","code":
// "body_too_large"} to a program; before, it was 400 "The form could not be read".
func TestFormTooLarge(t *testing.T) {
	p, _ := newPortal(t, "https://id.example.test")
	cookie := signedIn(p, "human-1")
	csrf := csrfOf(t, p, cookie)
	big := url.Values{"csrf": {csrf}, "name": {"Big"}, "redirect_uris": {strings.Repeat("a", 65<<10)}}

	r := serve(p, "POST", "/portal/apps", big, cookie)
	if r.Code != http.StatusRequestEntityTooLarge || !strings.HasPrefix(r.Header().Get("Content-Type"), "text/html") ||
		!strings.Contains(r.Body.String(), "64 KiB") {
		t.Errorf("a form over 64 KiB from a browser: %d %q, want 413 with the page naming the bound:\n%s", r.Code, r.Header().Get("Content-Type"), r.Body)
	}
	// Its title is RFC 9110's reason phrase, not RFC 2616's "Request Entity Too Large".
	if body := r.Body.String(); !strings.Contains(body, "<title>Content Too Large") || strings.Contains(body, "Entity") {
		t.Errorf("the 413 page's title is not RFC 9110's \"Content Too Large\":\n%.400s", body)
	}

	req := httptest.NewRequest("POST", "/portal/apps", strings.NewReader(big.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(cookie)
	w := httptest.NewRecorder()
	p.ServeHTTP(w, req)
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), `"code":"body_too_large"`) {
		t.Errorf("a form over 64 KiB from a program: %d %s, want 413 body_too_large", w.Code, w.Body)
	}

	// A malformed form within the bound is still 400.
	if r := serve(p, "POST", "/portal/apps", url.Values{"csrf": {csrf}}, cookie); r.Code == http.StatusRequestEntityTooLarge {
		t.Errorf("a small form: %d", r.Code)
	}
}
