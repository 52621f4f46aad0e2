package portal

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestErrorsAreJSONForPrograms: an unknown path or method under /portal, asked
// by a program (no Accept, */*, application/json, or a browser's Accept that
// also names JSON), is answered in JSON, {"error","code"}, with the status a
// browser's page has; a browser (Accept naming text/html) still gets the page.
func TestErrorsAreJSONForPrograms(t *testing.T) {
	p, _ := newPortal(t, "http://127.0.0.1:8080")
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/portal/nothing", http.StatusNotFound, "not_found"},
		{"GET", "/portal/api/v1/apps", http.StatusNotFound, "not_found"},
		{"PUT", "/portal", http.StatusMethodNotAllowed, "method_not_allowed"},
		{"POST", "/portal/apps", http.StatusUnauthorized, "unauthorized"},
	} {
		for _, accept := range []string{"", "*/*", "application/json", "application/json, text/html", "text/html;q=0, */*"} {
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(""))
			if accept != "" {
				req.Header.Set("Accept", accept)
			}
			w := httptest.NewRecorder()
			p.ServeHTTP(w, req)
			var body struct{ Error, Code string }
			if w.Code != tc.status || w.Header().Get("Content-Type") != "application/json" ||
				json.Unmarshal(w.Body.Bytes(), &body) != nil || body.Code != tc.code || body.Error == "" {
				t.Errorf("%s %s, Accept %q: %d %q %s; want %d JSON with code %s", tc.method, tc.path, accept, w.Code, w.Header().Get("Content-Type"), w.Body, tc.status, tc.code)
			}
		}
		req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(""))
		req.Header.Set("Accept", browserAccept)
		w := httptest.NewRecorder()
		p.ServeHTTP(w, req)
		if w.Code != tc.status || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") || !strings.Contains(w.Body.String(), `id="error"`) {
			t.Errorf("%s %s from a browser: %d %q, want %d with the error page", tc.method, tc.path, w.Code, w.Header().Get("Content-Type"), tc.status)
		}
	}
}
