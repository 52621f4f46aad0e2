package caddymodule

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/storage/memstore"
)

// TestAdminEmptyPatch: a PATCH of a client that names no field is the caller's
// mistake, 400 naming the fields, not a 200 and a "client updated" audit entry
// for a change that did not happen (fourth review).
func TestAdminEmptyPatch(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	svc, _ := newTestOIDC(t, store)
	a := &App{oidc: svc, logger: zap.NewNop()}
	ci, _, err := svc.Clients().Create(ctx, oidc.ClientSpec{Name: new("Patched"), RedirectURIs: []string{"https://app.example/callback"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{`{}`, `{"redirect_uris":null}`} {
		w := httptest.NewRecorder()
		err := a.serveAdminClients(w, httptest.NewRequest(http.MethodPatch, "/palmgate/clients/"+ci.ID, strings.NewReader(body)))
		var apiErr caddy.APIError
		if !errors.As(err, &apiErr) || apiErr.HTTPStatus != http.StatusBadRequest || !strings.Contains(apiErr.Err.Error(), "redirect_uris") {
			t.Errorf("PATCH %s: %d, %v; want 400 naming the fields", body, w.Code, err)
		}
	}
}

// TestCLIClientUpdateWithoutFlags: `caddy palmgate client update <id>` with no
// flag to change says so, and names them, before calling the admin API.
func TestCLIClientUpdateWithoutFlags(t *testing.T) {
	var called atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called.Store(true)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"client_id":"pg_x","name":"x"}`)
	}))
	defer srv.Close()
	root := &cobra.Command{Use: "palmgate"}
	addClientCommands(root)
	root.SetArgs([]string{"client", "update", "pg_x", "--address", strings.TrimPrefix(srv.URL, "http://")})
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), "--redirect-uri") {
		t.Errorf("client update without flags: %v; want an error naming the flags", err)
	}
	if called.Load() {
		t.Error("client update without flags called the admin API")
	}
}
