package integration

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/palmgate/palmgate/internal/tooltest"
)

// Silent renewal of a single-page app (issue 21, item 6), with oidc-client-ts in
// headless Chromium: in a hidden iframe with prompt=none when the app and
// palmgate are same-site, with the rotating refresh token when they are not.
// palmgate runs on http://127.0.0.1:<port>; a site ignores the port, so an app on
// another port of 127.0.0.1 is same-site, and one on localhost is cross-site.

// silentStep bounds the wait for an outcome of the app's silent flow: a renewal
// (a refresh, or an iframe that oidc-client-ts gives up on after 20s) on a
// loaded machine.
const silentStep = time.Minute

// readJSONText waits for the page to show the element with id and reads its JSON.
func readJSONText(t *testing.T, ctx context.Context, id string) map[string]any {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, silentStep)
	defer cancel()
	if err := chromedp.Do(c, chromedp.WaitVisible(chromedp.ID(id))); err != nil {
		lc, cancel2 := context.WithTimeout(ctx, 5*time.Second)
		defer cancel2()
		loc, _ := chromedp.Run(lc, chromedp.Location())
		text, _ := chromedp.Run(lc, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		t.Fatalf("waiting for #%s: %v\nthe browser is at %s, showing:\n%s", id, err, loc, text)
	}
	text, err := chromedp.Run(c, chromedp.Text(chromedp.ID(id)))
	if err != nil {
		t.Fatalf("reading #%s: %v", id, err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		t.Fatalf("#%s: %q is not JSON", id, text)
	}
	return m
}

// TestSPASilentRenewal (issue 21): with sso_session on, a single-page app on
// another port of palmgate's host (same-site) that holds no refresh token (it
// asks for openid only) renews in oidc-client-ts's hidden iframe with
// prompt=none: a new access token for the same pairwise sub, no palm scan. After
// its RP-initiated logout (signoutRedirect), the same iframe renewal answers
// login_required: the session ended.
func TestSPASilentRenewal(t *testing.T) {
	t.Parallel()
	tooltest.Chromium.Need(t) // before any server starts
	npmCI(t, "rp/spa")

	var issuer string
	app := spaServer(t, func() map[string]string {
		return map[string]string{"authority": issuer, "client_id": "spa-silent", "scope": "openid", "flow": "silent"}
	})
	spa := oidcClient{id: "spa-silent", name: "Silent SPA", public: true, scopes: testScopes,
		redirects: []string{app.URL + "/callback", app.URL + "/silent"}, postLogout: []string{app.URL + "/signedout"}}
	e := startOIDC(t, []oidcClient{spa}, "sso_session 1h")
	issuer = e.URL + "/oauth2"

	ctx := startChromium(t)
	simulateLogin(t, ctx, app.URL+"/", "alice", "#signedin")
	if r := readJSONText(t, ctx, "iframe"); r["hadRefreshToken"] != false || r["renewed"] != true || r["newAccessToken"] != true || r["sameSub"] != true {
		t.Fatalf("iframe renewal within the session, same-site: %v, want a new access token for the same sub, and no refresh token held", r)
	}

	browserStep(t, ctx, "signing out (signoutRedirect)", chromedp.Click(chromedp.ID("signout")))
	if r := readJSONText(t, ctx, "afterLogout"); r["renewed"] != false || r["error"] != "login_required" {
		t.Errorf("iframe renewal after logout: %v, want login_required", r)
	}
	c, cancel := context.WithTimeout(ctx, rpStep)
	defer cancel()
	if loc, err := chromedp.Run(c, chromedp.Location()); err != nil || !strings.HasPrefix(loc, app.URL+"/signedout") {
		t.Errorf("after logout the browser is at %q (%v), want the app's post_logout_redirect_uri", loc, err)
	}
}

// TestSPACrossSiteRenewal (issue 21): an app on another site (localhost, while
// palmgate is on 127.0.0.1) renews with its rotating refresh token across
// origins (CORS on the token endpoint), but its hidden-iframe renewal answers
// login_required although the browser holds a live palmgate session: a
// cross-site iframe is not sent the SameSite=Lax session cookie. The session is
// there: a top-level prompt=none navigation in the same browser gets a code.
func TestSPACrossSiteRenewal(t *testing.T) {
	t.Parallel()
	tooltest.Chromium.Need(t) // before any server starts
	npmCI(t, "rp/spa")

	var issuer string
	srv := spaServer(t, func() map[string]string {
		return map[string]string{"authority": issuer, "client_id": "spa-cross", "scope": "openid offline_access", "flow": "silent"}
	})
	appURL := strings.Replace(srv.URL, "://127.0.0.1:", "://localhost:", 1)
	if appURL == srv.URL {
		t.Fatalf("the app's server %s is not on 127.0.0.1", srv.URL)
	}
	spa := oidcClient{id: "spa-cross", name: "Cross-site SPA", public: true, scopes: testScopes,
		redirects: []string{appURL + "/callback", appURL + "/silent"}}
	e := startOIDC(t, []oidcClient{spa}, "sso_session 1h")
	issuer = e.URL + "/oauth2"

	ctx := startChromium(t)
	simulateLogin(t, ctx, appURL+"/", "alice", "#signedin")
	if r := readJSONText(t, ctx, "refreshed"); r["rotated"] != true || r["newAccessToken"] != true || r["sameSub"] != true {
		t.Errorf("renewal with the refresh token, cross-site: %v, want a rotated refresh token and a new access token for the same sub", r)
	}
	if r := readJSONText(t, ctx, "iframe"); r["hadRefreshToken"] != true || r["renewed"] != false || r["error"] != "login_required" {
		t.Errorf("iframe renewal, cross-site: %v, want login_required (no session cookie in a cross-site iframe)", r)
	}

	// The control: the session is live for a top-level navigation.
	verifier := randHex(32)
	sum := sha256.Sum256([]byte(verifier))
	authURL := e.authURL(spa, "scope", "openid", "prompt", "none",
		"code_challenge", base64.RawURLEncoding.EncodeToString(sum[:]), "code_challenge_method", "S256")
	browserStep(t, ctx, "prompt=none at the top level", chromedp.Navigate(authURL))
	c, cancel := context.WithTimeout(ctx, rpStep)
	defer cancel()
	loc, err := chromedp.Run(c, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(loc)
	if err != nil || !strings.HasPrefix(loc, appURL+"/callback?") || u.Query().Get("code") == "" {
		t.Errorf("top-level prompt=none in the same browser reached %q, want the app's callback with a code (the session is live)", loc)
	}
}
