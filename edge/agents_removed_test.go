package edge_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/palmgate/palmgate/core/agent"
)

// TestAgentRemovedByItsOwnerLosesItsTokens: an agent its owner removes on the
// agents page loses its grants with it (the registry's removal hook): its live
// token is refused by /oauth2/check at once, and it gets no new token. When the
// hook fails, the removal stands and the page says so (the failure is logged).
func TestAgentRemovedByItsOwnerLosesItsTokens(t *testing.T) {
	e := newEnv(t)
	bot, other := newAgent("removed-bot"), newAgent("hook-fails-bot")
	e.register(t, bot, "alice")
	e.register(t, other, "alice")
	q := authorizeQuery()
	q.Set("requested_actor", bot.deviceID)
	check := e.agentAccess(t, q, bot, testClientID, testSecret)

	cookie, csrf := e.ownerSignIn(t, "alice")
	w := e.ownerPost(t, "/v1/human/agents/remove", cookie, url.Values{"csrf": {csrf}, "deviceId": {bot.deviceID}})
	wantPage(t, w, http.StatusOK, "Removed removed-bot.")
	if got := check(); got != http.StatusUnauthorized {
		t.Errorf("/oauth2/check of the removed agent's live token: %d, want 401", got)
	}
	w = e.agentToken(t, bot, testClientID, testSecret)
	wantStatus(t, w, http.StatusBadRequest)
	if m := decode(t, w); m["error"] != "invalid_grant" {
		t.Errorf("a removed agent's token request = %s; want invalid_grant", w.Body)
	}

	e.agents.OnRemoved(func(context.Context, agent.Removed) error { return errors.New("store unavailable") })
	w = e.ownerPost(t, "/v1/human/agents/remove", cookie, url.Values{"csrf": {csrf}, "deviceId": {other.deviceID}})
	wantPage(t, w, http.StatusOK, "Removed hook-fails-bot.")
	// The person is told that what the agent was already given lives on: they
	// may be removing a stolen agent.
	wantPage(t, w, http.StatusOK, "could not be ended now")
	wantPage(t, w, http.StatusOK, "within 1h")
	if m := decode(t, e.get(t, "/v1/agent/verify/device/hook-fails-bot")); m["registered"] != false {
		t.Errorf("a failing hook undid the removal: %v", m)
	}
}
