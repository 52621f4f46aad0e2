package caddymodule

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/palmgate/palmgate/storage/memstore"
	"github.com/palmgate/palmgate/storage/storagetest"
)

// TestAdminStatsStoreDown (third review, finding 6): GET /palmgate/stats with
// the database down answered 500, as for a bug; every other admin route answers
// 503 then, so that an operator (or a script retrying) sees the outage for what
// it is.
func TestAdminStatsStoreDown(t *testing.T) {
	store := &storagetest.DownStore{Store: memstore.New()}
	w := httptest.NewRecorder()
	if err := serveStats(w, httptest.NewRequest(http.MethodGet, "/palmgate/stats", nil), store); err != nil || w.Code != http.StatusOK {
		t.Fatalf("stats with the store up: %d, %v", w.Code, err)
	}
	store.Down.Store(true)
	err := serveStats(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/palmgate/stats", nil), store)
	var apiErr caddy.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatus != http.StatusServiceUnavailable {
		t.Fatalf("stats with the store down = %v, want a 503 APIError", err)
	}
}
