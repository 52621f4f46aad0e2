package edge_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/storage"
)

// TestAgentsPageAfterTheOperatorEndsThePerson (fourth review): once an operator
// ends a person's sessions (DELETE /palmgate/humans/{humanId}/sessions: the admin
// API runs oidc.EndHuman with the agents page's EndHumanOwnerSessions), the page
// the person has open answers each of its forms with a page that says the
// session has ended and links to a new one (before: the fault's prose, "this
// page's session has ended or the form is not its own: open the page again", and
// no way on), nothing changed; a reload starts a new palm step, never a raw error;
// the palm step's poll is the 404 its script turns into its gone words.
func TestAgentsPageAfterTheOperatorEndsThePerson(t *testing.T) {
	e := newEnv(t)
	e.register(t, newAgent("ended-one"), "alice")
	cookie, csrf := e.ownerSignIn(t, "alice")
	w := e.getJSON(t, "/v1/human/agents", cookie)
	wantStatus(t, w, http.StatusOK)
	humanID, _ := decode(t, w)["humanId"].(string)

	if _, err := e.oidc.EndHuman(context.Background(), humanID, oidc.EndHumanOptions{Also: func(txn storage.Txn) error {
		n, err := e.agents.EndHumanOwnerSessions(txn, humanID)
		if err == nil && n != 1 {
			t.Errorf("ended %d agents page sessions, want 1", n)
		}
		return err
	}}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		path string
		form url.Values
	}{
		{"/v1/human/agents/remove", url.Values{"csrf": {csrf}, "deviceId": {"ended-one"}}},
		{"/v1/human/agents/revoke", url.Values{"csrf": {csrf}, "deviceId": {"ended-one"}, "clientId": {"x"}}},
		{"/v1/human/agents/signout", url.Values{"csrf": {csrf}}},
	} {
		w := e.do(t, req{method: http.MethodPost, target: tc.path, body: tc.form.Encode(), contentType: "application/x-www-form-urlencoded",
			header: http.Header{"Accept": {browserAccept}}, cookies: []*http.Cookie{cookie}})
		wantPage(t, w, http.StatusForbidden, "This page&#39;s session has ended (it expired, was signed out, or was ended for you)")
		body := w.Body.String()
		if !strings.Contains(body, `href="/v1/human/agents"`) || !strings.Contains(body, "Nothing was changed. Verify with your palm again") {
			t.Errorf("%s: the page offers no new session:\n%s", tc.path, body)
		}
	}
	if m := decode(t, e.get(t, "/v1/agent/verify/device/ended-one")); m["registered"] != true {
		t.Fatalf("an ended page removed the agent: %v", m)
	}
	// The page's JSON: 404, which its script says in its words.
	wantV1Error(t, e.getJSON(t, "/v1/human/agents", cookie), http.StatusNotFound, "owner_session_not_found", "")
	// A reload: a new palm step, not an error.
	w = e.do(t, req{method: http.MethodGet, target: "/v1/human/agents", header: http.Header{"Accept": {browserAccept}}, cookies: []*http.Cookie{cookie}})
	wantPage(t, w, http.StatusOK, "Verify with your palm")
	if strings.Contains(w.Body.String(), "ended-one") {
		t.Errorf("the reloaded page lists the person's agents:\n%s", w.Body)
	}
}
