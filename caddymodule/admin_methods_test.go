package caddymodule

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// TestAdminWrongMethodNamesAllow: every single-method admin route answers a
// wrong method 405 with Allow (RFC 9110 15.5.6); /palmgate/stats named none.
func TestAdminWrongMethodNamesAllow(t *testing.T) {
	for _, tc := range []struct {
		path, allow string
		serve       func(http.ResponseWriter, *http.Request) error
	}{
		{"/palmgate/stats", http.MethodGet, stats},
		{"/palmgate/backup", http.MethodGet, adminBackup},
		{"/palmgate/keys", http.MethodGet, adminKeys},
		{"/palmgate/keys/rotate", http.MethodPost, rotateKeys},
		{"/palmgate/humans", http.MethodGet, adminHumanBySubject},
		{"/palmgate/agents/a-1", http.MethodDelete, adminAgents},
	} {
		w := httptest.NewRecorder()
		err := tc.serve(w, httptest.NewRequest(http.MethodPut, tc.path, nil))
		var api caddy.APIError
		if !errors.As(err, &api) || api.HTTPStatus != http.StatusMethodNotAllowed {
			t.Errorf("PUT %s: %v; want a 405", tc.path, err)
		}
		if got := w.Header().Get("Allow"); got != tc.allow {
			t.Errorf("PUT %s: Allow %q; want %q", tc.path, got, tc.allow)
		}
	}
}
