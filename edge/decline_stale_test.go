package edge_test

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestDeclineFromAPageLeftOpen: "This is not my agent" and the login page's
// Cancel work as long as their request is pending, however long ago the page
// last renewed its scan URL: a page left in a background tab (whose timers the
// phone stopped while the person was in the palm app), or shown without
// script, renews nothing, and its form must not fail with scan_url_expired. The
// page's own cookie and token are what authorise it, not the QR code's nonce.
func TestDeclineFromAPageLeftOpen(t *testing.T) {
	e := newEnv(t)
	a := newAgent("stale-decline")
	w := e.postJSON(t, "/v1/agent/register/init", a.registration(e.clock.Now()))
	wantStatus(t, w, http.StatusCreated)
	sessionID, _ := decode(t, w)["sessionId"].(string)
	w = e.get(t, "/v1/agent/register/"+sessionID+"/verify")
	m := declineFormRE.FindStringSubmatch(w.Body.String())
	if m == nil {
		t.Fatalf("the registration page has no decline form:\n%s", w.Body)
	}
	cookie := cookieNamed(w, "__Secure-palmgate_register_"+sessionID[:12])
	e.clock.Advance(4 * time.Minute) // the scan URL (2 min, 1 more to complete) has lapsed; the session (15 min) has not
	w = e.do(t, req{method: http.MethodPost, target: html.UnescapeString(m[1]), body: url.Values{"csrf_token": {html.UnescapeString(m[2])}}.Encode(),
		contentType: "application/x-www-form-urlencoded", cookies: []*http.Cookie{cookie}})
	if w.Code != http.StatusSeeOther {
		t.Fatalf("decline from a page left open 4 minutes: %d, want 303; body %s", w.Code, w.Body)
	}
	if s, _ := decode(t, e.get(t, "/v1/agent/register/"+sessionID+"/status"))["status"].(string); s != "failed" {
		t.Errorf("after the decline the session is %q, want failed", s)
	}

	l := e.authorize(t, authorizeQuery())
	token := e.cancelToken(t, l)
	e.clock.Advance(4 * time.Minute)
	w = e.postCancel(t, url.Values{"auth_request_id": {l.id}, "csrf_token": {token}}, l.cookie)
	if w.Code != http.StatusFound {
		t.Fatalf("Cancel from a login page left open 4 minutes: %d, want 302 to the client; body %s", w.Code, w.Body)
	}
	if loc := w.Header().Get("Location"); !strings.Contains(loc, "error=access_denied") || !strings.Contains(loc, "state=st-123") {
		t.Errorf("Cancel: Location %q, want access_denied and the state", loc)
	}
}
