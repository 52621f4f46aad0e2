package integration

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
	"github.com/palmgate/palmgate/internal/tooltest"
)

// TestSingleLogoutRealBinary: with sso_session on, one palm scan signs a browser
// in to client a, and the session signs it in to client b (its consent page):
// a logout with a's id_token_hint, sent by a server without the browser's
// cookie (oauth2-proxy's backend logout), ends b's login too: b's refresh token
// is refused, b's backchannel_logout_uri (a test server) receives a logout
// token with the sid of b's login, and the browser's session answers
// login_required. Another browser's session of the same person goes on.
func TestSingleLogoutRealBinary(t *testing.T) {
	t.Parallel()
	got := make(chan string, 10)
	rp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		got <- r.PostForm.Get("logout_token")
	}))
	t.Cleanup(rp.Close)
	a, b := newOIDCClient("slo-a", ""), newOIDCClient("slo-b", "")
	bConf := strings.Replace(b.config(), "}\n", "backchannel_logout_uri "+rp.URL+"/bcl\n}\n", 1)
	e := startOIDC(t, []oidcClient{a}, "sso_session 1h", bConf)
	issuer := e.URL
	alice := e.subject("alice")

	br := newSSOBrowser(e)
	codeA, _ := br.scanLogin(t, issuer, a, alice)
	tokA := e.exchange(t, a, codeA, "")
	w, id := br.classify(t, issuer, br.authorize(t, b))
	if w != toConsent {
		t.Fatalf("client b in the session: not sent to the consent page")
	}
	reqID, token := br.consentForm(t, id)
	resp := br.consent(t, reqID, token, "allow")
	q := callbackQuery(t, resp.Header.Get("Location"), b.redirects[0])
	tokB := e.exchange(t, b, q.Get("code"), "")
	sidB := str(jwtPart(t, str(tokB["id_token"]), 1)["sid"])
	// The same person in another browser: another session, not ended.
	other := newSSOBrowser(e)
	codeO, _ := other.scanLogin(t, issuer, b, alice)
	tokO := e.exchange(t, b, codeO, "")

	e.do(t, "GET", "/oauth2/logout?"+url.Values{"id_token_hint": {str(tokA["id_token"])}}.Encode(), nil).ExpectStatus(t, http.StatusOK)

	if r := e.refresh(t, b, str(tokB["refresh_token"])); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "invalid_grant") {
		t.Errorf("b's refresh after a's logout: %d %s; want 400 invalid_grant", r.Status, r.Body)
	}
	if r := e.refresh(t, b, str(tokO["refresh_token"])); r.Status != http.StatusOK {
		t.Errorf("the other browser's refresh after the logout: %d %s; want 200", r.Status, r.Body)
	}
	if _, errCode := br.silent(t, issuer, a, "prompt", "none"); errCode != "login_required" {
		t.Errorf("after the logout, prompt=none: error %q, want login_required", errCode)
	}
	if code, _ := other.silent(t, issuer, b, "prompt", "none"); code == "" {
		t.Error("the other browser's session ended too")
	}
	var logoutToken string
	select {
	case logoutToken = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("no logout token at b's backchannel_logout_uri 20s after a's logout")
	}
	if claims := jwtPart(t, logoutToken, 1); str(claims["sid"]) != sidB || fmt.Sprint(claims["aud"]) != "["+b.id+"]" {
		t.Errorf("logout token claims %v; want sid %s (b's login) and aud %s", claims, sidB, b.id)
	}
}

// TestSingleLogoutModAuthOpenIDC: a browser signs in to client a with a palm
// scan (starting its SSO session), then to Apache with mod_auth_openidc
// (application b, a backchannel_logout_uri) through that session, without a
// scan. A logout with a's id_token_hint, from a server (no cookie), ends b's
// login too: palmgate POSTs Apache a logout token, mod_auth_openidc drops the
// browser's session there, and its next request goes back to palmgate.
func TestSingleLogoutModAuthOpenIDC(t *testing.T) {
	tooltest.Apache.Need(t)
	rp := newApacheRP(t)
	a := newOIDCClient("slo-a", "")
	e := startOIDC(t, []oidcClient{a}, "sso_session 1h", rp.conf)
	issuer := e.URL + "/oauth2"
	rp.start(t, issuer)
	page, redirect := rp.page, rp.redirect

	br := newSSOBrowser(e)
	codeA, _ := br.scanLogin(t, e.URL, a, e.subject("alice"))
	tokA := e.exchange(t, a, codeA, "")
	ap := newApacheBrowser(t)
	status, loc, body := ap.get(t, page)
	if status != http.StatusFound || !strings.HasPrefix(loc, issuer+"/authorize?") {
		t.Fatalf("before signing in to Apache: %d to %q, want 302 to palmgate's authorize\n%s", status, loc, testserver.Snippet([]byte(body)))
	}
	resp := br.do(t, "GET", loc, nil) // the same browser, holding its palmgate session
	next := resp.Header.Get("Location")
	if w, id := br.classify(t, e.URL, next); w == toConsent {
		reqID, token := br.consentForm(t, id)
		next = br.consent(t, reqID, token, "allow").Header.Get("Location")
	} else if w != toClient {
		t.Fatalf("Apache's authorization request in the session: Location %q, want no scan", next)
	}
	if !strings.HasPrefix(next, redirect+"?") || !strings.Contains(next, "code=") {
		t.Fatalf("the session's answer to Apache: %q, want a code at its redirect URI", next)
	}
	if status, loc, body = ap.get(t, next); status != http.StatusFound || loc != page {
		t.Fatalf("Apache's callback: %d to %q, want 302 to %s\n%s", status, loc, page, testserver.Snippet([]byte(body)))
	}
	if status, _, body := ap.get(t, page); status != http.StatusOK || body != "the protected page\n" {
		t.Fatalf("signed in to Apache: %d %q, want the protected page", status, body)
	}

	e.do(t, "GET", "/oauth2/logout?"+url.Values{"id_token_hint": {str(tokA["id_token"])}}.Encode(), nil).ExpectStatus(t, http.StatusOK)
	waitApacheSignedOut(t, e, ap, page, issuer, "the Apache session signed in through the SSO session, after a's logout")
}
