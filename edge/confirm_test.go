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

var actionHrefRE = regexp.MustCompile(`id="action" href="([^"]+)"`)

// TestAnonymousClientErrorIsAPage (fourth review; RFC 9700 4.11.2): anyone may
// register a client (registration open) whose redirect_uri is a phishing page,
// then send people a link to palmgate's authorize endpoint with a request palmgate
// refuses at once (response_type=token, prompt=none without a session, an unknown
// scope). palmgate answered 302 to the phishing page: an open redirector at the
// issuer's origin. Now such a client's error is a 400 page naming the host, whose
// one link goes on with the error, state and iss; the operator's client is still
// redirected.
func TestAnonymousClientErrorIsAPage(t *testing.T) {
	e := newEnv(t, withRegistration(oidc.RegistrationConfig{}))
	const phish = "https://evil.example/phish"
	w := e.postJSON(t, "/oauth2/register", map[string]any{"redirect_uris": []string{phish}, "token_endpoint_auth_method": "none"})
	wantStatus(t, w, http.StatusCreated)
	id, _ := decode(t, w)["client_id"].(string)
	for _, bad := range [][2]string{{"response_type", "token"}, {"prompt", "none"}, {"scope", "openid nope"}, {"response_mode", "form_post"}} {
		q := url.Values{"response_type": {"code"}, "client_id": {id}, "redirect_uri": {phish}, "scope": {"openid"}, "state": {"st-1"},
			"code_challenge": {pkceChallenge()}, "code_challenge_method": {"S256"}}
		q.Set(bad[0], bad[1])
		if bad[0] == "response_mode" {
			q.Set("response_type", "token")
		}
		w := e.getPage(t, "/oauth2/authorize?"+q.Encode())
		if loc := w.Header().Get("Location"); loc != "" || w.Code != http.StatusBadRequest {
			t.Fatalf("%s=%s: %d to %q; want a 400 page, no redirect to the registrant's URI", bad[0], bad[1], w.Code, loc)
		}
		body := w.Body.String()
		if !strings.Contains(body, "evil.example") || strings.Contains(body, "<form") || strings.Contains(body, "<script>") {
			t.Errorf("%s=%s: the page does not name the host, or would go on by itself: %s", bad[0], bad[1], body)
		}
		m := actionHrefRE.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("%s=%s: no link on to the client: %s", bad[0], bad[1], body)
		}
		next, err := url.Parse(html.UnescapeString(m[1]))
		if err != nil || next.Scheme+"://"+next.Host+next.Path != phish || next.Query().Get("error") == "" ||
			next.Query().Get("state") != "st-1" || next.Query().Get("iss") != testIssuer+"/oauth2" {
			t.Errorf("%s=%s: the link = %q; want the redirect_uri with error, state and iss", bad[0], bad[1], m[1])
		}
		if cc := w.Header().Get("Cache-Control"); cc != "no-store" {
			t.Errorf("Cache-Control = %q; want no-store", cc)
		}
	}
	// The operator's client: redirected as RFC 6749 4.1.2.1 says.
	q := authorizeQuery()
	q.Set("response_type", "token")
	w = e.getPage(t, "/oauth2/authorize?"+q.Encode())
	wantStatus(t, w, http.StatusFound)
	if !strings.HasPrefix(w.Header().Get("Location"), testRedirect+"?") {
		t.Fatalf("the operator's client: Location %q; want its redirect_uri", w.Header().Get("Location"))
	}
}

// TestAnonymousClientExpiredLoginIsAPage (fourth review; RFC 9700 4.11.2): a
// login page left open until its palm challenge expired reloaded itself into a
// 302 to the client with access_denied: anyone's link to a self-registered
// client's authorization request sent the tab that nobody touched on to the
// registrant's page, under the issuer's name. Such an answer is now the page with
// one link; the operator's client is still redirected.
func TestAnonymousClientExpiredLoginIsAPage(t *testing.T) {
	e := newEnv(t, withRegistration(oidc.RegistrationConfig{}))
	const phish = "https://evil.example/phish"
	w := e.postJSON(t, "/oauth2/register", map[string]any{"redirect_uris": []string{phish}, "token_endpoint_auth_method": "none"})
	wantStatus(t, w, http.StatusCreated)
	id, _ := decode(t, w)["client_id"].(string)
	q := url.Values{"response_type": {"code"}, "client_id": {id}, "redirect_uri": {phish}, "scope": {"openid"}, "state": {"st-1"},
		"code_challenge": {pkceChallenge()}, "code_challenge_method": {"S256"}}
	l := e.authorize(t, q)
	own := e.authorize(t, authorizeQuery())
	e.clock.Advance(11 * time.Minute) // past the login's 10 minutes, its records still kept
	w = e.do(t, req{method: http.MethodGet, target: "/oauth2/verify?auth_request_id=" + url.QueryEscape(l.id), cookies: []*http.Cookie{l.cookie}})
	if loc := w.Header().Get("Location"); loc != "" || w.Code != http.StatusBadRequest {
		t.Fatalf("the expired login of a self-registered client: %d to %q; want a 400 page, no redirect", w.Code, loc)
	}
	m := actionHrefRE.FindStringSubmatch(w.Body.String())
	if m == nil {
		t.Fatalf("no link on to the client: %s", w.Body)
	}
	if next, err := url.Parse(html.UnescapeString(m[1])); err != nil || next.Scheme+"://"+next.Host+next.Path != phish ||
		next.Query().Get("error") != oidc.ErrAccessDenied || next.Query().Get("state") != "st-1" {
		t.Errorf("the link = %q; want the redirect_uri with access_denied and state", m[1])
	}
	w = e.do(t, req{method: http.MethodGet, target: "/oauth2/verify?auth_request_id=" + url.QueryEscape(own.id), cookies: []*http.Cookie{own.cookie}})
	wantStatus(t, w, http.StatusFound)
	if !strings.HasPrefix(w.Header().Get("Location"), testRedirect+"?") {
		t.Fatalf("the operator's client's expired login: Location %q; want its redirect_uri", w.Header().Get("Location"))
	}
}
