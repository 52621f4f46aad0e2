package caddymodule

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/storage/memstore"
	"github.com/palmgate/palmgate/storage/storagetest"
)

// TestAdminDeleteStandsWhenItsCleanUpFails: when the database goes away between
// a client's deletion and the ending of its grants and consents
// (oidc.ErrAfterClientDeletion), DELETE /palmgate/clients/{id} still answers
// 204, for the deletion happened, and logs one warning naming the client and
// the clean-up's error.
func TestAdminDeleteStandsWhenItsCleanUpFails(t *testing.T) {
	store := &storagetest.DownStore{Store: memstore.New()}
	svc, _ := newTestOIDC(t, store)
	core, logs := observer.New(zapcore.WarnLevel)
	a := &App{oidc: svc, logger: zap.New(core)}

	w := httptest.NewRecorder()
	create := httptest.NewRequest(http.MethodPost, "/palmgate/clients",
		strings.NewReader(`{"name":"Doomed","redirect_uris":["https://app.example/callback"]}`))
	if err := a.serveAdminClients(w, create); err != nil || w.Code != http.StatusCreated {
		t.Fatalf("create: %d, %v\n%s", w.Code, err, w.Body)
	}
	var created oidc.ClientInfo
	if err := json.Unmarshal(w.Body.Bytes(), &created); err != nil || created.ID == "" {
		t.Fatalf("create answered %s (%v)", w.Body, err)
	}

	store.DownAfterUpdate.Store(true)
	w = httptest.NewRecorder()
	err := a.serveAdminClients(w, httptest.NewRequest(http.MethodDelete, "/palmgate/clients/"+created.ID, nil))
	if !store.Down.Load() {
		t.Fatal("the deletion wrote nothing: its clean-up never met the failing store")
	}
	if err != nil || w.Code != http.StatusNoContent {
		t.Errorf("delete with its clean-up failing: %d, %v; want 204, for the client is deleted", w.Code, err)
	}
	warned := logs.FilterMessage("palmgate: the deleted client's grants and consents").All()
	if len(warned) != 1 {
		t.Fatalf("%d warnings about the clean-up, want 1; the log: %v", len(warned), logs.All())
	}
	fields := warned[0].ContextMap()
	if msg, _ := fields["error"].(string); fields["client_id"] != created.ID ||
		!strings.Contains(msg, oidc.ErrAfterClientDeletion.Error()) || !strings.Contains(msg, "connection refused") {
		t.Errorf("the warning's fields %v, want the client id and the clean-up's error", fields)
	}

	store.DownAfterUpdate.Store(false)
	store.Down.Store(false)
	err = a.serveAdminClients(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/palmgate/clients/"+created.ID, nil))
	var apiErr caddy.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatus != http.StatusNotFound {
		t.Errorf("GET of the deleted client = %v, want 404", err)
	}
}
