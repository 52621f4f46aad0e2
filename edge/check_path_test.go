package edge_test

import (
	"net/http"
	"testing"
)

// TestCheckIgnoresTheClientsQuery (review 3, finding 5): Envoy's ext_authz builds
// the check's path as path_prefix followed by the client's own path and query,
// so docs/GATEWAYS.md ends the prefix with `&path=`. Everything after that
// parameter is the client's: before, a client's `&agents=allow` there was read as
// the operator's, and an agent's token was admitted by a gateway that refuses
// agents (the default); likewise the whole query of /oauth2/check/<client path>.
// The operator's own parameters, before path=, still apply.
func TestCheckIgnoresTheClientsQuery(t *testing.T) {
	e := newEnv(t)
	bot := newAgent("query-bot")
	e.register(t, bot, "alice")
	q := authorizeQuery()
	q.Set("requested_actor", "query-bot")
	e.agentConsent(t, q, "alice")
	w := e.agentToken(t, bot, testClientID, testSecret)
	wantStatus(t, w, http.StatusOK)
	agent, _ := decode(t, w)["access_token"].(string)
	person, _ := e.tokens(t, "alice")["access_token"].(string)

	check := func(target, token string) int {
		t.Helper()
		return e.do(t, req{method: http.MethodGet, target: target, header: bearer(token)}).Code
	}
	for _, tc := range []struct {
		name, target, token string
		want                int
	}{
		{"the operator's default refuses agents", "/oauth2/check?scope=openid&path=/api/orders", agent, http.StatusForbidden},
		{"the client's agents=allow after path=", "/oauth2/check?scope=openid&path=/api/orders?x=1&agents=allow", agent, http.StatusForbidden},
		{"the client's agents=allow, first in its query", "/oauth2/check?scope=openid&path=/api/orders&agents=allow", agent, http.StatusForbidden},
		{"the operator's agents=allow before path=", "/oauth2/check?scope=openid&agents=allow&path=/api/orders?agents=deny", agent, http.StatusOK},
		{"the person's token", "/oauth2/check?scope=openid&path=/api/orders?x=1&agents=only", person, http.StatusOK},
		{"the operator's scope still applies", "/oauth2/check?scope=orders&path=/api/orders", person, http.StatusForbidden},
		{"without path=, every parameter is the operator's", "/oauth2/check?scope=openid&agents=allow", agent, http.StatusOK},
		// path_prefix /oauth2/check: the client's path follows, and its query is the
		// only one.
		{"the client's query after an appended path", "/oauth2/check/api/orders?agents=allow", agent, http.StatusForbidden},
		{"the person's token after an appended path", "/oauth2/check/api/orders?scope=openid&agents=only", person, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := check(tc.target, tc.token); got != tc.want {
				t.Fatalf("GET %s: %d, want %d", tc.target, got, tc.want)
			}
		})
	}
}
