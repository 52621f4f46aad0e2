package integration

import (
	"crypto/ed25519"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	coreagent "github.com/palmgate/palmgate/core/agent"
	"github.com/palmgate/palmgate/internal/testserver"
)

const windowsChrome = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36"

// TestLoginBoundToBrowser: whoever learns an auth_request_id (a pasted link, a
// link-preview bot, a log) but lacks the login cookie of the browser that started
// the login sees no nonce and no scan URL, cannot take the code, and a HEAD
// request consumes nothing. A wrong cookie (a wrong value under the right name,
// another login's) counts as none.
func TestLoginBoundToBrowser(t *testing.T) {
	t.Parallel()
	app := newOIDCClient("bound-app", "")
	e := startOIDC(t, []oidcClient{app})

	resp := e.do(t, "GET", e.authURL(app), nil).ExpectStatus(t, http.StatusFound)
	id := strings.TrimPrefix(resp.Header.Get("Location"), e.URL+"/oauth2/verify?auth_request_id=")
	cookie := resp.Header.Get("Set-Cookie")
	for _, attr := range []string{"palmgate_login_" + id[:12] + "=", "Path=/", "HttpOnly", "SameSite=Lax", "Max-Age="} {
		if !strings.Contains(cookie, attr) {
			t.Errorf("authorize Set-Cookie %q lacks %s", cookie, attr)
		}
	}

	// Another login of another browser: its cookie is well formed, and valid for it.
	otherLogin := e.do(t, "GET", e.authURL(app), nil).ExpectStatus(t, http.StatusFound)
	otherCookies := (&http.Response{Header: otherLogin.Header}).Cookies()
	if len(otherCookies) != 1 || otherCookies[0].Value == "" {
		t.Fatalf("the second authorize set cookies %v, want one", otherCookies)
	}
	name := "palmgate_login_" + id[:12]
	// Browsers without this login's cookie: none, one with the right name and a
	// wrong value of the right form, one with the other login's value under this
	// login's name, and the other login's own cookie (issue 18, finding 11).
	presented := map[string]string{
		"no cookie":              "",
		"wrong value":            name + "=" + strings.Repeat("A", 43),
		"another login's value":  name + "=" + otherCookies[0].Value,
		"another login's cookie": otherCookies[0].Name + "=" + otherCookies[0].Value,
		"malformed value":        name + "=x",
	}
	expectNothingRevealed := func(when string) {
		t.Helper()
		for what, cookie := range presented {
			var h []string
			if cookie != "" {
				h = []string{"Cookie", cookie}
			}
			other := testserver.NewBrowser()
			j := testserver.DoWith(t, other, "GET", e.verifyURL(id), nil, append(h, "Accept", "application/json")...).ExpectStatus(t, http.StatusOK).Object(t)
			if j["nonce"] != nil || j["scanUrl"] != nil {
				t.Errorf("%s, %s: another browser's JSON view reveals the nonce or scan URL: %v", when, what, j)
			}
			page := testserver.DoWith(t, other, "GET", e.verifyURL(id), nil, h...)
			if page.Status != http.StatusForbidden || qrImgRE.Match(page.Body) || strings.Contains(string(page.Body), "?nonce=") ||
				page.Header.Get("Location") != "" {
				t.Errorf("%s, %s: another browser's page: status %d, want 403 without QR code, scan URL or code:\n%s", when, what, page.Status, testserver.Snippet(page.Body))
			}
		}
	}
	expectNothingRevealed("pending")

	p := e.loginPageJSON(t, id)
	e.scan(t, p, e.subject("bound"))
	expectNothingRevealed("verified")
	if head := e.do(t, "HEAD", e.verifyURL(id), nil); head.Status != http.StatusOK {
		t.Errorf("HEAD of the verified login page: status %d, want 200 (and nothing consumed)", head.Status)
	}
	q := e.finish(t, id, app.redirects[0])
	if q.Get("code") == "" {
		t.Errorf("the browser that started the login got no code after another's tries: %v", q)
	}
}

// TestScanURLTellsWhoAsks: the JSON the person's app reads at the scan URL names
// the application, the scopes in words, when and from which browser the login was
// asked; for a registration, the agent's deviceId and key fingerprint. The scan
// URL lives at most two minutes.
func TestScanURLTellsWhoAsks(t *testing.T) {
	t.Parallel()
	app := newOIDCClient("asking-app", "")
	e := startOIDC(t, []oidcClient{app})
	before := time.Now().Add(-time.Second)

	resp := e.do(t, "GET", e.authURL(app), nil, "User-Agent", windowsChrome).ExpectStatus(t, http.StatusFound)
	id := strings.TrimPrefix(resp.Header.Get("Location"), e.URL+"/oauth2/verify?auth_request_id=")
	p := e.loginPageJSON(t, id)
	scanExpires, err := time.Parse(time.RFC3339, p.ScanExpiresAt)
	if err != nil || scanExpires.After(time.Now().Add(2*time.Minute+time.Second)) {
		t.Errorf("scanExpiresAt %q (%v), want within 2 minutes", p.ScanExpiresAt, err)
	}
	req, _ := e.do(t, "GET", p.ScanURL, nil).ExpectStatus(t, http.StatusOK).Object(t)["request"].(map[string]any)
	requested, err := time.Parse(time.RFC3339, str(req["requestedAt"]))
	if str(req["clientName"]) != app.name || str(req["browserIp"]) != "127.0.0.1" || str(req["browserSummary"]) != "Chrome on Windows" ||
		err != nil || requested.Before(before) || requested.After(time.Now()) {
		t.Errorf("scan URL request = %v, want the app's name, 127.0.0.1, Chrome on Windows and the time", req)
	}
	if words, _ := req["scopeDescriptions"].([]any); len(words) != 2 {
		t.Errorf("scan URL request: scopeDescriptions %v, want the two scopes in words", req["scopeDescriptions"])
	}

	a := newAgent(t, "asking-agent")
	c := e.verifyInfo(t, e.initSession(t, a.registration(time.Now())))
	req, _ = e.challenge(t, c)["request"].(map[string]any)
	if want := coreagent.Fingerprint(a.priv.Public().(ed25519.PublicKey)); str(req["deviceId"]) != a.deviceID || str(req["keyFingerprint"]) != want || c.KeyFingerprint != want {
		t.Errorf("registration: scan URL request %v, page fingerprint %q; want deviceId %q and fingerprint %q", req, c.KeyFingerprint, a.deviceID, want)
	}
	page := e.do(t, "GET", "/v1/agent/register/"+c.SessionID+"/verify", nil).ExpectStatus(t, http.StatusOK)
	if !strings.Contains(string(page.Body), coreagent.Fingerprint(a.priv.Public().(ed25519.PublicKey))) {
		t.Errorf("the registration page does not show the key fingerprint %s", coreagent.Fingerprint(a.priv.Public().(ed25519.PublicKey)))
	}
}

// TestRegistrationDenyNeedsScan: the registration page's JSON carries no nonce,
// so whoever only holds the registration URL cannot deny; a deny without the
// nonce of a scan is 404 and changes nothing.
func TestRegistrationDenyNeedsScan(t *testing.T) {
	t.Parallel()
	e := start(t, testserver.Options{Global: "rate_limit off"})
	s := e.initSession(t, newAgent(t, "deny-agent").registration(time.Now()))
	j := e.do(t, "GET", s.URL, nil, "Accept", "application/json").ExpectStatus(t, http.StatusOK).Object(t)
	if j["nonce"] != nil || j["scanUrl"] != nil {
		t.Fatalf("registration page JSON reveals %v", j)
	}
	e.do(t, "POST", "/v1/palm/challenges/"+str(j["challengeId"])+"/deny", map[string]any{"nonce": ""}).ExpectError(t, http.StatusNotFound, "challenge_not_found", "")
	if st := e.status(t, s.ID); str(st["status"]) != "pending" {
		t.Errorf("session after a deny without the nonce: %v, want pending", st["status"])
	}
}

// TestLimitsPendingCaps: past max_pending_logins (or _registrations) new logins
// (or registrations) are refused with 503 and Retry-After, and nothing is stored,
// so a flood from any number of addresses fills a bounded amount of disk.
func TestLimitsPendingCaps(t *testing.T) {
	t.Parallel()
	app := newOIDCClient("capped-app", "")
	e := startOIDC(t, []oidcClient{app}, "max_pending_logins 2", "max_pending_registrations 2")
	for range 2 {
		e.do(t, "GET", e.authURL(app), nil).ExpectStatus(t, http.StatusFound)
		e.initSession(t, newAgent(t, "capped").registration(time.Now()))
	}
	before := storeCounts(t, e)
	login := e.do(t, "GET", e.authURL(app), nil)
	expectOAuthError(t, login, http.StatusServiceUnavailable, "temporarily_unavailable")
	reg := e.do(t, "POST", "/v1/agent/register/init", newAgent(t, "capped").registration(time.Now()))
	reg.ExpectError(t, http.StatusServiceUnavailable, "too_many_pending_requests", "")
	for _, r := range []*testserver.Response{login, reg} {
		if s := r.Header.Get("Retry-After"); s == "" || s == "0" {
			t.Errorf("%s: Retry-After %q, want a number of seconds", r.Request, s)
		}
	}
	after := storeCounts(t, e)
	for _, kind := range []string{"oidc/ar", "palm/c", "agent/s"} {
		if after[kind] != before[kind] {
			t.Errorf("%s records: %d after the refusals, want %d", kind, after[kind], before[kind])
		}
	}
}

// TestTwoLoginsAtOnce: a fresh browser that starts several logins at the same
// moment (tabs, or a page with two sign-in buttons) completes each of them: every
// login has its own binding cookie, none overwrites another's.
func TestTwoLoginsAtOnce(t *testing.T) {
	t.Parallel()
	app := newOIDCClient("twice-app", "")
	e := startOIDC(t, []oidcClient{app})
	browser := testserver.NewBrowser()
	const n = 4
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp := testserver.DoWith(t, browser, "GET", e.authURL(app), nil)
			ids[i] = strings.TrimPrefix(resp.Header.Get("Location"), e.URL+"/oauth2/verify?auth_request_id=")
		})
	}
	wg.Wait()
	for _, id := range ids {
		var p loginPage
		testserver.DoWith(t, browser, "GET", e.verifyURL(id), nil, "Accept", "application/json").ExpectStatus(t, http.StatusOK).Decode(t, &p)
		if p.Nonce == "" {
			t.Fatalf("login %s: the browser that started it is not recognised (another login's cookie replaced its own)", id)
		}
		e.scan(t, p, e.subject("twice"))
		resp := testserver.DoWith(t, browser, "GET", e.verifyURL(id), nil)
		if q := callbackQuery(t, resp.Header.Get("Location"), app.redirects[0]); resp.Status != http.StatusFound || q.Get("code") == "" {
			t.Errorf("login %s: status %d, Location %q; want the code", id, resp.Status, resp.Header.Get("Location"))
		}
		if !strings.Contains(resp.Header.Get("Set-Cookie"), "Max-Age=0") {
			t.Errorf("login %s: the code's redirect does not clear the login cookie: %q", id, resp.Header.Get("Set-Cookie"))
		}
	}
}
