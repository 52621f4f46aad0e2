package integration

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/palmgate/palmgate/internal/tooltest"
)

// TestAgentConsentInBrowser (issue 24): a person lets their registered agent act
// for them in headless Chromium. The application sends the browser to
// /oauth2/authorize with requested_actor; the verify page itself names the agent,
// the application and the scopes; the page's simulated palm scan records the
// grant and takes the browser to the application's redirect_uri with a code.
// Then the reference agent (examples/agent token), with its own key, obtains a
// token and calls an upstream behind `palmgate_bearer { agents allow }`, which
// sees the person's pairwise sub (the one the code's ID token names) and the
// agent; a site with the default (deny) refuses the same token.
func TestAgentConsentInBrowser(t *testing.T) {
	t.Parallel()
	tooltest.Chromium.Need(t) // before any server starts

	cb := &callbackRecorder{hit: make(chan struct{}, 1)}
	rp := httptest.NewServer(cb)
	t.Cleanup(rp.Close)
	shop := newOIDCClient("agent-shop", "")
	shop.name, shop.redirects = "Palm Shop", []string{rp.URL + "/callback"}
	u := newUpstream(t)
	e := start(t, oidcOptions([]oidcClient{shop}, "palmgate\n"+u.agentRoute("/agents/*", "agents allow")+u.agentRoute("/people/*")))
	alice := e.subject("agent-browser-alice")
	bot := newAgent(t, "browser-bot-"+randHex(4))
	e.register(t, bot, alice)
	// No grant yet: the agent gets no token.
	expectOAuthError(t, e.agentToken(t, shop, e.agentAssertion(t, bot)), http.StatusBadRequest, "invalid_grant")

	// 1. The application sends the browser to the authorization endpoint.
	step := newChromium(t)
	state := "st-" + randHex(8)
	authURL := e.authURL(shop, "scope", "openid orders:read", "state", state, "requested_actor", bot.deviceID)
	if _, err := chromedp.Run(step(20*time.Second), chromedp.NavigateResponse(authURL)); err != nil {
		t.Fatalf("navigating to the authorization URL: %v", err)
	}
	if err := chromedp.Do(step(10*time.Second), chromedp.WaitVisible(chromedp.ID("simulate-button"))); err != nil {
		t.Fatalf("the login page shows no simulated scan: %v", err)
	}

	// 2. The page, as the browser renders it, names the agent, the application
	// and the scopes.
	actorLine, err := chromedp.Run(step(5*time.Second), chromedp.Text(chromedp.ID("requested-actor")))
	if err != nil {
		t.Fatalf("the login page has no agent line (#requested-actor): %v", err)
	}
	if !strings.Contains(actorLine, bot.deviceID) {
		t.Errorf("the agent line %q does not name the agent %s", actorLine, bot.deviceID)
	}
	text, err := chromedp.Run(step(5*time.Second), chromedp.Text(chromedp.CSS("main")))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{shop.name, "orders:read", bot.deviceID} {
		if !strings.Contains(text, want) {
			t.Errorf("the login page lacks %q:\n%s", want, text)
		}
	}
	if got := cb.queries(); len(got) != 0 {
		t.Fatalf("the callback was called before the palm scan: %q", got)
	}

	// 3. The person scans (the dev page's simulated scan): the browser lands on
	// the application's redirect_uri with a code.
	if err := chromedp.Do(step(10*time.Second),
		chromedp.SetValue(chromedp.CSS(`input[name="palmSubject"]`), alice),
		chromedp.Click(chromedp.ID("simulate-button"))); err != nil {
		t.Fatalf("the simulated palm scan: %v", err)
	}
	select {
	case <-cb.hit:
	case <-time.After(browserWait):
		l, _ := chromedp.Run(step(5*time.Second), chromedp.Location())
		t.Fatalf("the browser did not reach the callback within %s of the palm scan; it is at %q", browserWait, l)
	}
	got := cb.queries()
	if len(got) != 1 {
		t.Fatalf("callback requests %q, want one", got)
	}
	q := callbackQuery(t, rp.URL+"/callback?"+got[0], shop.redirects[0])
	if q.Get("code") == "" || q.Get("state") != state || q.Get("error") != "" {
		t.Fatalf("callback query %v, want a code and state %s", q, state)
	}
	person := e.redeem(t, shop, q.Get("code")) // the person's own tokens: their pairwise sub at the shop

	// 4. The reference agent obtains a token with its key and calls the upstream
	// that admits agents.
	out := runExampleAgent(t, bot, "token", "-server", e.URL, "-device", bot.deviceID, "-client", shop.id, "-secret", shop.secret,
		"-scope", "orders:read", "-call", e.URL+"/agents/orders")
	if !strings.Contains(out, "HTTP 200") || !strings.Contains(out, `{"upstream":true}`) {
		t.Fatalf("examples/agent token: %s, want the upstream's answer", out)
	}
	access := printedToken(t, out)
	claims := jwtPart(t, access, 1)
	act, _ := claims["act"].(map[string]any)
	if str(claims["sub"]) != person.sub || str(act["sub"]) != bot.deviceID || str(claims["client_id"]) != shop.id {
		t.Errorf("the agent's token claims %v: want sub %s (the person's), act.sub %s, client_id %s", claims, person.sub, bot.deviceID, shop.id)
	}
	u.mu.Lock()
	seen := u.seen[""] // the agent's call sends no X-Test-Request
	u.mu.Unlock()
	if seen == nil {
		t.Fatal("the upstream never saw the agent's call")
	}
	for name, want := range map[string]string{"X-User-Sub": person.sub, "X-Palmgate-Sub": person.sub,
		"X-User-Agent": bot.deviceID, "X-Palmgate-Agent-Id": bot.deviceID} {
		if v := seen.Values(name); len(v) != 1 || v[0] != want {
			t.Errorf("agents allow: the upstream saw %s %q, want %q", name, v, want)
		}
	}

	// 5. The same token at a site with the default (deny): refused before the
	// upstream; the person's own token passes there.
	expectAgentRefused(t, u.call(t, e, "GET", "/people/orders", "Bearer "+access))
	if got := u.call(t, e, "GET", "/people/orders", "Bearer "+person.access); got.Status != http.StatusOK {
		t.Errorf("agents deny, the person's own token: %d, want 200", got.Status)
	}
}

// printedToken is the access token examples/agent token printed: the line after
// "... got a token for its human ...:".
func printedToken(t *testing.T, out string) string {
	t.Helper()
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.Contains(l, "got a token for its human") && i+1 < len(lines) && strings.Count(lines[i+1], ".") == 2 {
			return strings.TrimSpace(lines[i+1])
		}
	}
	t.Fatalf("examples/agent printed no token:\n%s", out)
	return ""
}
