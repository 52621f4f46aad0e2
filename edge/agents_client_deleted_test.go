package edge_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/palmgate/palmgate/core/oidc"
)

// TestAgentGrantEndsWithItsClient: once a dynamic client is deleted (what the
// portal, the admin API and the CLI call), the agent's live token for it is
// refused by /oauth2/check at once, and the agent gets no new token for it.
func TestAgentGrantEndsWithItsClient(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	bot := newAgent("client-bot")
	e.register(t, bot, "alice")
	name := "Doomed App"
	ci, secret, err := e.oidc.Clients().Create(ctx, oidc.ClientSpec{Name: &name, RedirectURIs: []string{testRedirect}, Owner: "dev-1"})
	if err != nil {
		t.Fatalf("creating the client: %v", err)
	}
	q := authorizeQuery()
	q.Set("client_id", ci.ID)
	q.Set("scope", "openid")
	q.Set("requested_actor", bot.deviceID)
	check := e.agentAccess(t, q, bot, ci.ID, secret)

	if err := e.oidc.Clients().Delete(ctx, ci.ID, "dev-1"); err != nil {
		t.Fatalf("deleting the client: %v", err)
	}
	if got := check(); got != http.StatusUnauthorized {
		t.Errorf("/oauth2/check of the deleted client's agent token: %d, want 401", got)
	}
	w := e.agentToken(t, bot, ci.ID, secret)
	wantStatus(t, w, http.StatusUnauthorized)
	if m := decode(t, w); m["error"] != "invalid_client" {
		t.Errorf("agent token for the deleted client = %s; want invalid_client", w.Body)
	}
}
