package integration

import (
	"html"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
)

// exampleCaddyfile is Caddyfile.example as it ships, on free ports and a
// temporary data directory: the test checks the log and timeout configuration
// users copy, not one of its own.
func exampleCaddyfile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	cf := string(b)
	for _, r := range [][2]string{
		{"admin localhost:{$PALMGATE_ADMIN_PORT:2019}", "admin 127.0.0.1:{adminport}"},
		{"http://localhost:{$PALMGATE_PORT:8080}", "http://127.0.0.1:{port}"},
		{"storage badger ./data/palmgate", "storage badger {datadir}/palmgate"},
		{"\n:{$PALMGATE_PORT:8080} {", "\n:{port} {"},
	} {
		if !strings.Contains(cf, r[0]) {
			t.Fatalf("Caddyfile.example no longer contains %q: update this test", r[0])
		}
		cf = strings.ReplaceAll(cf, r[0], r[1])
	}
	return cf
}

// TestExampleAccessLogRedacts starts the binary with Caddyfile.example and logs in
// with its demo client; the access log it writes must hold none of the login's
// codes, auth_request_ids, nonces, registration session ids or credentials in
// clear (issue 9, finding 10), nor the tokens and hints a client puts in a URI,
// the logout's id_token_hint above all (issue 18, finding 8).
func TestExampleAccessLogRedacts(t *testing.T) {
	e := start(t, testserver.Options{Caddyfile: exampleCaddyfile(t)})
	demo := oidcClient{id: "demo", secret: "demo-secret-change-me", redirects: []string{e.URL + "/demo/callback"}}

	rpNonce := "rp-nonce-" + randHex(8)
	authURL := e.authURL(demo, "nonce", rpNonce, "state", "st-log")
	id := e.authorize(t, authURL)
	p := e.loginPageJSON(t, id)
	e.do(t, "GET", p.ScanURL, nil).ExpectStatus(t, http.StatusOK)
	e.scan(t, p, e.subject("ann"))
	resp := e.do(t, "GET", e.verifyURL(id), nil)
	if resp.Status != http.StatusFound {
		t.Fatalf("login page after the scan: %d, want 302", resp.Status)
	}
	callback := resp.Header.Get("Location")
	code := callbackQuery(t, callback, demo.redirects[0]).Get("code")
	if code == "" {
		t.Fatalf("Location %q has no code", callback)
	}
	// The browser lands on the callback with the code in the URI (the demo refuses
	// it here, without its login cookie; the request is logged all the same).
	e.do(t, "GET", callback, nil, "Referer", e.verifyURL(id), "Cookie", "palmgate_demo=secret-cookie-"+randHex(4))
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {demo.redirects[0]}}
	m := e.postToken(t, form, "Authorization", basicAuth(demo.id, demo.secret)).ExpectStatus(t, http.StatusOK).Object(t)
	access, idToken := str(m["access_token"]), str(m["id_token"])
	if idToken == "" {
		t.Fatalf("no ID token: %v", m)
	}
	e.do(t, "GET", "/oauth2/userinfo", nil, "Authorization", "Bearer "+access).ExpectStatus(t, http.StatusOK)
	// Tokens a client puts in a URI (issue 18, finding 8): an access token in the
	// query (RFC 6750 2.3, which palmgate does not take), hints and a request
	// object at authorize, and the logout's ID token, which ends the login.
	e.do(t, "GET", "/oauth2/userinfo?access_token="+url.QueryEscape(access), nil)
	loginHint, logoutHint, requestURI := "login-hint-"+randHex(8), "logout-hint-"+randHex(8), "urn:request:"+randHex(8)
	e.do(t, "GET", e.authURL(demo, "login_hint", loginHint, "request_uri", requestURI), nil)
	e.do(t, "GET", e.authURL(demo, "request", idToken), nil)
	logout := "/oauth2/logout?" + url.Values{"id_token_hint": {idToken}, "logout_hint": {logoutHint}, "client_id": {demo.id}}.Encode()
	e.do(t, "GET", logout, nil).ExpectStatus(t, http.StatusOK)
	// A page opened by that URI sends it on as the Referer of what it loads.
	e.do(t, "GET", "/health/alive", nil, "Referer", e.URL+logout)
	e.expectRevoked(t, access)

	// An agent registration: its session id, in the owner's page URL, is as good as
	// an auth_request_id to whoever reads the log while it is pending.
	a := newAgent(t, "log-agent-"+randHex(4))
	sess := e.initSession(t, a.registration(time.Now()))
	e.verifyInfo(t, sess)
	e.do(t, "GET", e.URL+"/v1/agent/register/"+sess.ID+"/verify", nil).ExpectStatus(t, http.StatusOK)
	// Its owner declines it on the page (fourth review): the 303 back to the page
	// names the session in its Location.
	page := e.do(t, "GET", e.URL+"/v1/agent/register/"+sess.ID+"/verify", nil, "Accept", "text/html").ExpectStatus(t, http.StatusOK)
	token := regexp.MustCompile(`name="csrf_token" value="([^"]+)"`).FindSubmatch(page.Body)
	if token == nil {
		t.Fatalf("the registration page has no decline form:\n%s", testserver.Snippet(page.Body))
	}
	declined := e.do(t, "POST", e.URL+"/v1/agent/register/"+sess.ID+"/decline", url.Values{"csrf_token": {html.UnescapeString(string(token[1]))}}.Encode(),
		"Content-Type", "application/x-www-form-urlencoded", "Accept", "text/html")
	if declined.Status != http.StatusSeeOther || !strings.Contains(declined.Header.Get("Location"), sess.ID) {
		t.Fatalf("decline: %d Location %q, want 303 to the page", declined.Status, declined.Header.Get("Location"))
	}
	e.do(t, "GET", e.URL+"/v1/agent/register/"+sess.ID+"/status", nil).ExpectStatus(t, http.StatusOK)

	// Every request above is in the access log once it has been written.
	var log string
	deadline := time.Now().Add(30 * time.Second) // ends as soon as it is written
	for {
		log = e.Log()
		if strings.Contains(log, `/status"`) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var lines []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, `"logger":"http.log.access`) {
			lines = append(lines, l)
		}
	}
	if len(lines) < 17 {
		t.Fatalf("%d access log lines, want one per request (17 or more): is the example's log directive gone?\n%s", len(lines), log)
	}
	for _, want := range []string{"/oauth2/authorize?", "/oauth2/verify?auth_request_id=REDACTED", "nonce=REDACTED", "/demo/callback?code=REDACTED", `"Location":["`, "/v1/agent/register/REDACTED/verify", "/v1/agent/register/REDACTED/status", "/v1/agent/register/REDACTED/decline", "/v1/agent/register/init",
		"/oauth2/logout?client_id=demo&id_token_hint=REDACTED&logout_hint=REDACTED", "/oauth2/userinfo?access_token=REDACTED", "login_hint=REDACTED", "request_uri=REDACTED", "&request=REDACTED", "id_token_hint=REDACTED"} {
		if !strings.Contains(log, want) {
			t.Errorf("access log lacks %q:\n%s", want, strings.Join(lines, "\n"))
		}
	}
	for what, secret := range map[string]string{
		"auth_request_id": id, "challenge nonce": p.Nonce, "relying party nonce": rpNonce, "code": code,
		"Basic credentials": basicAuth(demo.id, demo.secret), "access token": access, "cookie": "secret-cookie-",
		"registration session id": sess.ID, "ID token": idToken, "ID token's signature": idToken[strings.LastIndex(idToken, ".")+1:],
		"access token's signature": access[strings.LastIndex(access, ".")+1:], "login_hint": loginHint, "logout_hint": logoutHint,
		"request_uri": requestURI,
	} {
		if strings.Contains(log, secret) || strings.Contains(log, url.QueryEscape(secret)) {
			t.Errorf("the access log holds the %s in clear", what)
		}
	}

	cfg := adminGet(t, e, "/config/apps/http/servers/")
	for _, want := range []string{`"read_timeout":10000000000`, `"read_header_timeout":10000000000`} {
		if !strings.Contains(cfg, want) {
			t.Errorf("HTTP servers config lacks %s: %s", want, cfg)
		}
	}
}
