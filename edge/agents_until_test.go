package edge_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
)

// agentConsent runs a login of q (with requested_actor) through the verify page
// and a palm scan as palmSubject, and checks that it answers with a code.
func (e *testEnv) agentConsent(t *testing.T, q url.Values, palmSubject string) {
	t.Helper()
	l := e.authorize(t, q)
	id, nonce := e.challenge(t, l)
	e.devScan(t, id, nonce, palmSubject)
	w := e.do(t, req{method: http.MethodGet, target: "/oauth2/verify?auth_request_id=" + l.id, cookies: []*http.Cookie{l.cookie}})
	wantStatus(t, w, http.StatusFound)
	if loc, _ := url.Parse(w.Header().Get("Location")); loc == nil || loc.Query().Get("code") == "" {
		t.Fatalf("the consent answered %q; want a code", w.Header().Get("Location"))
	}
}

// agentToken asks the token endpoint for a token of agent bot (the jwt-bearer
// grant, an assertion with a fresh jti) as client clientID.
// agentAccess has alice consent to bot acting for her at clientID (q, the
// authorization request with requested_actor), gets the agent's token, and
// returns a check of that token at /oauth2/check?agents=allow (its status),
// which answers 200 now.
func (e *testEnv) agentAccess(t *testing.T, q url.Values, bot *testAgent, clientID, secret string) (check func() int) {
	t.Helper()
	e.agentConsent(t, q, "alice")
	w := e.agentToken(t, bot, clientID, secret)
	wantStatus(t, w, http.StatusOK)
	access, _ := decode(t, w)["access_token"].(string)
	check = func() int {
		return e.do(t, req{method: http.MethodGet, target: "/oauth2/check?agents=allow", header: bearer(access)}).Code
	}
	if got := check(); got != http.StatusOK {
		t.Fatalf("/oauth2/check of the agent's token: %d, want 200", got)
	}
	return check
}

func (e *testEnv) agentToken(t *testing.T, bot *testAgent, clientID, secret string) *recorder {
	t.Helper()
	now := e.clock.Now()
	assertion, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{
		"iss": bot.deviceID, "sub": bot.deviceID, "aud": testIssuer + "/oauth2/token",
		"iat": now.Unix(), "exp": now.Add(time.Minute).Unix(), "jti": uuid.NewString(),
	}).SignedString(bot.priv)
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}, "assertion": {assertion},
		"client_id": {clientID}, "client_secret": {secret}}
	return e.do(t, req{method: http.MethodPost, target: "/oauth2/token", body: form.Encode(), contentType: "application/x-www-form-urlencoded"})
}

// TestAgentGrantUntilOnThePages: a login with requested_actor and
// requested_actor_until names the grant's end next to the agent, as a <time>
// the page's script shows in the person's own time zone (UTC without script);
// once consented and used, the owner's agents page shows the grant's end and
// its last use the same way, no longer in UTC text alone.
func TestAgentGrantUntilOnThePages(t *testing.T) {
	e := newEnv(t)
	bot := newAgent("until-bot")
	e.register(t, bot, "alice")
	until := e.clock.Now().Add(72 * time.Hour).UTC().Truncate(time.Second)
	q := authorizeQuery()
	q.Set("requested_actor", "until-bot")
	q.Set("requested_actor_until", until.Format(time.RFC3339))
	l := e.authorize(t, q)

	w := e.do(t, req{method: http.MethodGet, target: "/oauth2/verify?auth_request_id=" + l.id, cookies: []*http.Cookie{l.cookie}})
	wantPage(t, w, http.StatusOK, `id="requested-actor"`)
	iso := until.Format("2006-01-02T15:04:05.000Z")
	want := `until <time class="local" id="requested-actor-until" datetime="` + iso + `" data-form="date">` +
		until.Format("2006-01-02 15:04:05") + ` (UTC)</time>`
	if !strings.Contains(w.Body.String(), want) {
		t.Fatalf("the login page does not name the grant's end %s next to the agent:\n%s", iso, w.Body)
	}
	e.agentConsent(t, q, "alice")

	// The agent uses its grant once: the page shows when, as a local time too.
	used := `<time class="local" datetime="` + e.clock.Now().UTC().Format("2006-01-02T15:04:05.000Z") + `" data-form="date">`
	wantStatus(t, e.agentToken(t, bot, testClientID, testSecret), http.StatusOK)

	cookie, _ := e.ownerSignIn(t, "alice")
	w = e.do(t, req{method: http.MethodGet, target: "/v1/human/agents", cookies: []*http.Cookie{cookie}})
	wantPage(t, w, http.StatusOK, `<table id="grants">`)
	row := regexp.MustCompile(`(?s)<tr data-device-id="until-bot" data-client-id="[^"]+">.*?</tr>`).FindString(w.Body.String())
	if !strings.Contains(row, `<time class="local" datetime="`+iso+`" data-form="date">`) || !strings.Contains(row, used) {
		t.Fatalf("the grant's row does not show its end and its last use as local <time>s:\n%s", w.Body)
	}
	if strings.Contains(w.Body.String(), "(UTC)</th>") {
		t.Error("the grants table still heads a column (UTC)")
	}
}
