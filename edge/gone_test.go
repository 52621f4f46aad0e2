package edge_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/storage"
)

// TestLoginPageSaysWhenGone: the login page carries the words its script shows
// once the poll is refused, and the poll of a login whose records are gone
// (unknown: collected after expiry) or already answered is a 400 in the OAuth
// JSON dialect, never a 200 the script would wait on. (Third review: the page
// said "Waiting for your palm scan…" forever.)
func TestLoginPageSaysWhenGone(t *testing.T) {
	e := newEnv(t)
	l := e.authorize(t, authorizeQuery())
	w := e.do(t, req{method: http.MethodGet, target: "/oauth2/verify?auth_request_id=" + l.id, cookies: []*http.Cookie{l.cookie}})
	wantPage(t, w, http.StatusOK, `data-gone="This sign-in has expired or has already ended." data-gone-todo="Go back to the application and sign in again."`)

	wantOAuthError(t, e.getJSON(t, "/oauth2/verify?auth_request_id=00000000-0000-4000-8000-000000000000", l.cookie), http.StatusBadRequest, "invalid_request")
	token := e.cancelToken(t, l)
	wantStatus(t, e.postCancel(t, url.Values{"auth_request_id": {l.id}, "csrf_token": {token}}, l.cookie), http.StatusFound)
	wantOAuthError(t, e.getJSON(t, "/oauth2/verify?auth_request_id="+l.id, l.cookie), http.StatusBadRequest, "invalid_request")

}

// TestRegistrationPageSaysWhenGone: the registration page carries the words its
// script shows once the poll is refused, and the poll of a session whose records
// are gone (collected after its expiry: deleted here) is a 404 in the /v1 JSON
// dialect. A session that completed, failed or expired but is still stored is
// polled as a 200 with the challenge's status, so the page reloads to its own
// state and never shows the gone words. (Third review: the page said "Waiting
// for your palm scan…" forever once the session was gone.)
func TestRegistrationPageSaysWhenGone(t *testing.T) {
	e := newEnv(t)
	const words = `data-gone="This registration request has expired or has already ended." data-gone-todo="Ask the agent to start again."`
	initSession := func(deviceID string) string {
		t.Helper()
		w := e.postJSON(t, "/v1/agent/register/init", newAgent(deviceID).registration(e.clock.Now()))
		wantStatus(t, w, http.StatusCreated)
		id, _ := decode(t, w)["sessionId"].(string)
		return id
	}
	page := func(id string) string { return "/v1/agent/register/" + id + "/verify" }
	pollStatus := func(id string) any {
		t.Helper()
		w := e.getJSON(t, page(id))
		wantStatus(t, w, http.StatusOK)
		return decode(t, w)["status"]
	}

	gone := initSession("gone-agent")
	wantPage(t, e.get(t, page(gone)), http.StatusOK, words)
	if err := e.store.Update(context.Background(), func(txn storage.Txn) error {
		return txn.Delete([]byte("agent/s/" + gone))
	}); err != nil {
		t.Fatal(err)
	}
	wantV1Error(t, e.getJSON(t, page(gone)), http.StatusNotFound, "session_not_found", "")
	wantV1Error(t, e.getJSON(t, page("00000000-0000-4000-8000-000000000000")), http.StatusNotFound, "session_not_found", "")

	done := e.register(t, newAgent("done-agent"), "alice")
	if s := pollStatus(done); s != "verified" {
		t.Errorf("the poll of a completed registration sees %v, want verified", s)
	}
	w := e.get(t, page(done))
	wantPage(t, w, http.StatusOK, "Registered.")
	if strings.Contains(w.Body.String(), "data-gone") {
		t.Errorf("the completed registration's page carries the gone words:\n%s", w.Body)
	}

	pending := initSession("late-agent")
	e.clock.Advance(16 * time.Minute) // past the env's 15-minute SessionTTL, still stored
	if s := pollStatus(pending); s != "expired" {
		t.Errorf("the poll of an expired registration sees %v, want expired", s)
	}
	w = e.get(t, page(pending))
	wantPage(t, w, http.StatusOK, "This registration request has expired. Ask the agent to start again.")
	if strings.Contains(w.Body.String(), "data-gone") {
		t.Errorf("the expired registration's page carries the gone words:\n%s", w.Body)
	}
}

// TestAgentsPageSaysWhenGone: the agents page's palm step carries the words its
// script shows once the poll is refused, and the poll of an owner session that
// is gone (its record collected after the expiry: deleted here; or no session
// at all) is a 404 in the /v1 JSON dialect. Before, it was a 200 "expired", on
// which the page reloaded and started a new palm challenge by itself. A
// declined session that is still stored is polled as a 200 "denied", so the
// page reloads to its own "declined" state.
func TestAgentsPageSaysWhenGone(t *testing.T) {
	e := newEnv(t)
	cookie, _, _ := e.ownerPage(t)
	wantPage(t, e.do(t, req{method: http.MethodGet, target: "/v1/human/agents", cookies: []*http.Cookie{cookie}}), http.StatusOK,
		`data-gone="This palm verification has expired or has already ended." data-gone-todo="Reload this page to start again."`)
	sum := sha256.Sum256([]byte(cookie.Value))
	if err := e.store.Update(context.Background(), func(txn storage.Txn) error {
		return txn.Delete([]byte("agent/o/" + hex.EncodeToString(sum[:])))
	}); err != nil {
		t.Fatal(err)
	}
	wantV1Error(t, e.getJSON(t, "/v1/human/agents", cookie), http.StatusNotFound, "owner_session_not_found", "")
	wantV1Error(t, e.getJSON(t, "/v1/human/agents"), http.StatusNotFound, "owner_session_not_found", "")

	declined, id, nonce := e.ownerPage(t)
	wantStatus(t, e.postJSON(t, "/v1/palm/challenges/"+id+"/deny", map[string]string{"nonce": nonce}), http.StatusOK)
	w := e.getJSON(t, "/v1/human/agents", declined)
	wantStatus(t, w, http.StatusOK)
	if s := decode(t, w)["status"]; s != "denied" {
		t.Errorf("the poll of a declined agents page sees %v, want denied", s)
	}
}
