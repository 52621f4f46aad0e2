package edge_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/oidc"
)

const cursorCallback = "cursor://anysphere.cursor-retrieval/oauth/user-palmgate/callback"

// TestPrivateUseSchemeClientFlow (fourth review; RFC 8252 7.1): a native MCP
// client (Cursor) registers its private-use scheme redirect URI through RFC 7591,
// signs in (the code goes to cursor://... by a 302, with state and iss) and
// redeems the code with PKCE. Its refused form_post request is the confirm page
// whose link is the cursor:// URI itself (the page template replaced any scheme
// but http(s) and mailto with #ZgotmplZ) and names the app's scheme, not a host.
// A confidential registration, and a script scheme, are refused.
func TestPrivateUseSchemeClientFlow(t *testing.T) {
	e := newEnv(t, withRegistration(oidc.RegistrationConfig{}))
	w := e.postJSON(t, "/oauth2/register", map[string]any{"redirect_uris": []string{cursorCallback}, "token_endpoint_auth_method": "none", "client_name": "Cursor"})
	wantStatus(t, w, http.StatusCreated)
	id, _ := decode(t, w)["client_id"].(string)
	q := url.Values{"response_type": {"code"}, "client_id": {id}, "redirect_uri": {cursorCallback}, "scope": {"openid"}, "state": {"st-9"},
		"code_challenge": {pkceChallenge()}, "code_challenge_method": {"S256"}}
	w = e.scanned(t, q, "alice")
	wantStatus(t, w, http.StatusFound)
	loc, err := url.Parse(w.Header().Get("Location"))
	if err != nil || !strings.HasPrefix(loc.String(), cursorCallback+"?") || loc.Query().Get("state") != "st-9" || loc.Query().Get("code") == "" {
		t.Fatalf("Location = %q; want the cursor:// redirect_uri with code and state", w.Header().Get("Location"))
	}
	w = e.postForm(t, "/oauth2/token", url.Values{"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")}, "redirect_uri": {cursorCallback},
		"code_verifier": {testPKCEVerifer}, "client_id": {id}}, nil)
	wantStatus(t, w, http.StatusOK)

	q.Set("response_mode", "form_post")
	w = e.getPage(t, "/oauth2/authorize?"+q.Encode())
	if w.Code != http.StatusBadRequest || w.Header().Get("Location") != "" || strings.Contains(w.Body.String(), "<form") {
		t.Fatalf("form_post to cursor://: %d, Location %q; want the confirm page", w.Code, w.Header().Get("Location"))
	}
	m := actionHrefRE.FindStringSubmatch(w.Body.String())
	if m == nil {
		t.Fatalf("no link on: %s", w.Body)
	}
	next := html.UnescapeString(m[1])
	if !strings.HasPrefix(next, cursorCallback+"?") || !strings.Contains(next, "error=invalid_request") || !strings.Contains(w.Body.String(), "Continue to cursor://anysphere.cursor-retrieval") {
		t.Fatalf("the link = %q; want the cursor:// URI with the error, named by its scheme: %s", next, w.Body)
	}

	for _, body := range []map[string]any{
		{"redirect_uris": []string{cursorCallback}},
		{"redirect_uris": []string{"javascript://x/%0aalert(1)"}, "token_endpoint_auth_method": "none"},
		{"redirect_uris": []string{"data:/text/html,x"}, "token_endpoint_auth_method": "none"},
	} {
		wantOAuthError(t, e.postJSON(t, "/oauth2/register", body), http.StatusBadRequest, oidc.ErrInvalidRedirectURI)
	}
}

var continueHrefRE = regexp.MustCompile(`id="continue" href="([^"]+)"`)

// TestAnonymousClientLogoutIsConfirmed (fourth review; RP-Initiated Logout 1.0
// 3.1, RFC 9700 4.11.2): a self-registered client's post_logout_redirect_uris are
// taken (they were dropped, so a logout to one was refused). A logout without
// the client's id_token_hint ends the session and shows the signed-out page with
// one link on, not a redirect (anyone may register https://evil.example/ and
// send people a logout link); with the hint, it redirects.
func TestAnonymousClientLogoutIsConfirmed(t *testing.T) {
	e := newEnv(t, withRegistration(oidc.RegistrationConfig{}))
	const callback, bye = "http://127.0.0.1:8123/cb", "https://evil.example/bye"
	w := e.postJSON(t, "/oauth2/register", map[string]any{"redirect_uris": []string{callback}, "token_endpoint_auth_method": "none",
		"post_logout_redirect_uris": []string{bye, "com.example.app:/signedout"}})
	wantStatus(t, w, http.StatusCreated)
	reg := decode(t, w)
	id, _ := reg["client_id"].(string)
	if got, _ := reg["post_logout_redirect_uris"].([]any); len(got) != 2 {
		t.Fatalf("registration echo post_logout_redirect_uris = %v", reg["post_logout_redirect_uris"])
	}
	q := url.Values{"client_id": {id}, "post_logout_redirect_uri": {bye}, "state": {"s-1"}}
	w = e.getPage(t, "/oauth2/logout?"+q.Encode())
	if w.Code != http.StatusOK || w.Header().Get("Location") != "" {
		t.Fatalf("logout to a registrant's URI without hint: %d, Location %q; want the signed-out page", w.Code, w.Header().Get("Location"))
	}
	m := continueHrefRE.FindStringSubmatch(w.Body.String())
	if m == nil || html.UnescapeString(m[1]) != bye+"?state=s-1" || !strings.Contains(w.Body.String(), "Continue to evil.example") ||
		!strings.Contains(w.Body.String(), "You are signed out") {
		t.Fatalf("the signed-out page lacks the one link on to %s: %s", bye, w.Body)
	}
	q.Set("post_logout_redirect_uri", "com.example.app:/signedout")
	if m := continueHrefRE.FindStringSubmatch(e.getPage(t, "/oauth2/logout?"+q.Encode()).Body.String()); m == nil || !strings.HasPrefix(html.UnescapeString(m[1]), "com.example.app:/signedout?") {
		t.Fatalf("the link to a private-use scheme = %v", m)
	}

	lq := url.Values{"response_type": {"code"}, "client_id": {id}, "redirect_uri": {callback}, "scope": {"openid"},
		"code_challenge": {pkceChallenge()}, "code_challenge_method": {"S256"}}
	w = e.scanned(t, lq, "alice")
	wantStatus(t, w, http.StatusFound)
	loc, _ := url.Parse(w.Header().Get("Location"))
	w = e.postForm(t, "/oauth2/token", url.Values{"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")}, "redirect_uri": {callback},
		"code_verifier": {testPKCEVerifer}, "client_id": {id}}, nil)
	wantStatus(t, w, http.StatusOK)
	hint, _ := decode(t, w)["id_token"].(string)
	w = e.get(t, "/oauth2/logout?"+url.Values{"id_token_hint": {hint}, "post_logout_redirect_uri": {bye}, "state": {"s-2"}}.Encode())
	wantStatus(t, w, http.StatusFound)
	if got := w.Header().Get("Location"); got != bye+"?state=s-2" {
		t.Fatalf("logout with the client's hint: Location %q; want %s?state=s-2", got, bye)
	}
	// (Fourth review.) The hint ended its login: the same hint again (ID tokens
	// are taken expired, so one sign-in of the registrant's own made a link that
	// redirected anyone, forever) ends no login, and is confirmed.
	w = e.get(t, "/oauth2/logout?"+url.Values{"id_token_hint": {hint}, "post_logout_redirect_uri": {bye}, "state": {"s-3"}}.Encode())
	if w.Code != http.StatusOK || w.Header().Get("Location") != "" {
		t.Fatalf("logout with a hint of a login already ended: %d, Location %q; want the signed-out page", w.Code, w.Header().Get("Location"))
	}
	if m := continueHrefRE.FindStringSubmatch(w.Body.String()); m == nil || html.UnescapeString(m[1]) != bye+"?state=s-3" {
		t.Fatalf("the signed-out page lacks the one link on to %s: %s", bye, w.Body)
	}
}

// TestPrivateUseSchemeInSessionAsksEachTime (fourth review; RFC 8252 8.6): within
// the SSO session, a request to a private-use scheme URI (which any app may
// claim) is not answered with a code at once even after consent: the consent
// page says it asks each time, and its Allow sends the code to cursor://.
func TestPrivateUseSchemeInSessionAsksEachTime(t *testing.T) {
	e := newEnv(t, withSSO(12*time.Hour), withRegistration(oidc.RegistrationConfig{}))
	w := e.postJSON(t, "/oauth2/register", map[string]any{"redirect_uris": []string{cursorCallback}, "token_endpoint_auth_method": "none", "client_name": "Cursor"})
	wantStatus(t, w, http.StatusCreated)
	id, _ := decode(t, w)["client_id"].(string)
	q := url.Values{"response_type": {"code"}, "client_id": {id}, "redirect_uri": {cursorCallback}, "scope": {"openid"}, "state": {"st-9"},
		"code_challenge": {pkceChallenge()}, "code_challenge_method": {"S256"}}
	w = e.scanned(t, q, "alice")
	wantStatus(t, w, http.StatusFound)
	sess := cookieNamed(w, "__Host-palmgate_session")
	if sess == nil || !strings.HasPrefix(w.Header().Get("Location"), cursorCallback+"?") {
		t.Fatalf("the scan's answer: Location %q, session %v", w.Header().Get("Location"), sess)
	}
	w = e.do(t, req{method: http.MethodGet, target: "/oauth2/authorize?" + q.Encode(), cookies: []*http.Cookie{sess}})
	wantStatus(t, w, http.StatusFound)
	loc, _ := url.Parse(w.Header().Get("Location"))
	if loc.Path != "/oauth2/consent" {
		t.Fatalf("in the session: Location %q; want the consent page, not a code for whichever app holds the scheme", loc)
	}
	login := w.Result().Cookies()[0]
	page := e.do(t, req{method: http.MethodGet, target: loc.RequestURI(), cookies: []*http.Cookie{sess, login}})
	wantPage(t, page, http.StatusOK, `id="each-time"`)
	m := consentTokenRE.FindStringSubmatch(page.Body.String())
	if m == nil {
		t.Fatalf("no consent form: %s", page.Body)
	}
	form := url.Values{"auth_request_id": {loc.Query().Get("auth_request_id")}, "csrf_token": {html.UnescapeString(m[1])}, "decision": {"allow"}}
	w = e.do(t, req{method: http.MethodPost, target: "/oauth2/consent", body: form.Encode(), contentType: "application/x-www-form-urlencoded", cookies: []*http.Cookie{sess, login}})
	wantStatus(t, w, http.StatusFound)
	if next, _ := url.Parse(w.Header().Get("Location")); !strings.HasPrefix(next.String(), cursorCallback+"?") || next.Query().Get("code") == "" {
		t.Fatalf("Allow: Location %q; want the code at cursor://", w.Header().Get("Location"))
	}
	q.Set("prompt", "none")
	w = e.do(t, req{method: http.MethodGet, target: "/oauth2/authorize?" + q.Encode(), cookies: []*http.Cookie{sess}})
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "consent_required") {
		t.Fatalf("prompt=none: %d %q; want the confirm page with consent_required", w.Code, w.Header().Get("Location"))
	}
}
