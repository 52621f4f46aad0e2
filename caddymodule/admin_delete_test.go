package caddymodule

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// TestDeleteTarget: the admin routes that only delete answer 404 without a
// target, 405 with Allow: DELETE to another method, and the target otherwise.
func TestDeleteTarget(t *testing.T) {
	for _, c := range []struct {
		method, path, target string
		status               int
	}{
		{"DELETE", "/palmgate/agents/dev-1", "dev-1", 0},
		{"DELETE", "/palmgate/agents/", "", http.StatusNotFound},
		{"DELETE", "/palmgate/other", "", http.StatusNotFound},
		{"GET", "/palmgate/agents/dev-1", "", http.StatusMethodNotAllowed},
	} {
		w := httptest.NewRecorder()
		target, err := deleteTarget(w, httptest.NewRequest(c.method, c.path, nil), "/palmgate/agents/", "{deviceId}")
		var apiErr caddy.APIError
		switch {
		case c.status == 0 && (err != nil || target != c.target):
			t.Errorf("%s %s = %q, %v; want %q", c.method, c.path, target, err, c.target)
		case c.status != 0 && (!errors.As(err, &apiErr) || apiErr.HTTPStatus != c.status):
			t.Errorf("%s %s = %q, %v; want %d", c.method, c.path, target, err, c.status)
		case c.status == http.StatusMethodNotAllowed && w.Header().Get("Allow") != http.MethodDelete:
			t.Errorf("%s %s: Allow %q; want DELETE", c.method, c.path, w.Header().Get("Allow"))
		}
	}
}
