package edge_test

import (
	"net/http"
	"net/url"
	"testing"
)

// TestAgentsRemoveJSONListsGrantsLeft: the JSON answer of a removal on the
// agents page lists what is left, the grants of the person's other agents as
// well as the agents, as the page's JSON and a revocation's answer do: a
// program reading it must not conclude that the person's grants are gone.
func TestAgentsRemoveJSONListsGrantsLeft(t *testing.T) {
	e := newEnv(t)
	kept, gone := newAgent("kept-bot"), newAgent("gone-bot")
	e.register(t, kept, "alice")
	e.register(t, gone, "alice")
	q := authorizeQuery()
	q.Set("requested_actor", kept.deviceID)
	e.agentAccess(t, q, kept, testClientID, testSecret)

	cookie, csrf := e.ownerSignIn(t, "alice")
	rq := req{method: http.MethodPost, target: "/v1/human/agents/remove",
		body:        url.Values{"csrf": {csrf}, "deviceId": {gone.deviceID}}.Encode(),
		contentType: "application/x-www-form-urlencoded", header: http.Header{"Accept": {"application/json"}},
		cookies: []*http.Cookie{cookie}}
	w := e.do(t, rq)
	wantStatus(t, w, http.StatusOK)
	m := decode(t, w)
	agents, _ := m["agents"].([]any)
	grants, _ := m["grants"].([]any)
	if m["status"] != "removed" || len(agents) != 1 {
		t.Fatalf("removal answer = %s, want status removed and kept-bot left", w.Body)
	}
	if len(grants) != 1 || grants[0].(map[string]any)["deviceId"] != kept.deviceID {
		t.Errorf("removal answer's grants = %v, want kept-bot's grant; body %s", m["grants"], w.Body)
	}
}
