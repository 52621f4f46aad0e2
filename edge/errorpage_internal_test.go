package edge

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/core/fault"
)

// TestAcceptsHTML pins the negotiation rule: a page when Accept names text/html
// (q above zero) and not application/json; JSON for everything else.
func TestAcceptsHTML(t *testing.T) {
	for accept, want := range map[string]bool{
		"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8": true, // Chromium, Firefox
		"text/html":                        true,
		"TEXT/HTML; charset=utf-8":         true,
		"application/json":                 false, // the pages' own polling, API callers
		"application/json, text/html":      false,
		"text/html, application/json;q=.5": false,
		"text/html;q=0":                    false,
		"*/*":                              false, // apps, curl
		"":                                 false,
		"text/plain":                       false,
		"garbage;;;":                       false,
	} {
		r := httptest.NewRequest("GET", "/oauth2/authorize", nil)
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		if got := acceptsHTML(r); got != want {
			t.Errorf("acceptsHTML(Accept: %q) = %v, want %v", accept, got, want)
		}
	}
}

// TestErrorPageEscapesAndBounds: a fault message that quotes the request (here
// markup, and very long) reaches the small print escaped and cut to
// maxDetailRunes.
func TestErrorPageEscapesAndBounds(t *testing.T) {
	msg := `bad value <script>alert(1)</script>"` + strings.Repeat("x", 5000)
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/v1/x", nil)
	New(Config{}).writeErrorPage(w, r, fault.New(fault.Invalid, "invalid_field", "%s", msg))
	body := w.Body.String()
	if w.Code != 400 || strings.Contains(body, "<script>") || !strings.Contains(body, "&lt;script&gt;") {
		t.Errorf("status %d; the message is not escaped:\n%s", w.Code, body)
	}
	if strings.Contains(body, strings.Repeat("x", maxDetailRunes)) || !strings.Contains(body, "…") {
		t.Errorf("the message is not cut to %d runes:\n%s", maxDetailRunes, body)
	}
}
