package oidc

import (
	"context"
	"strings"
	"testing"
)

const (
	cursorRedirect = "cursor://anysphere.cursor-retrieval/oauth/user-palmgate/callback"
	nativeRedirect = "com.example.app:/oauth2redirect"
)

// TestPrivateUseSchemeRedirectURIs (fourth review; RFC 8252 7.1): a native app's
// private-use scheme redirect URI (Cursor's cursor://..., com.example.app:/...)
// is accepted for a public client, everywhere a client is registered (the
// Caddyfile's clients, the portal and admin API, RFC 7591, a metadata document);
// refused for a confidential one, and for schemes a browser runs, loads or
// fetches itself. Every redirect URI had to be http(s) before.
func TestPrivateUseSchemeRedirectURIs(t *testing.T) {
	for _, uri := range []string{cursorRedirect, nativeRedirect, "com.googleusercontent.apps.123:/oauth2redirect", "vscode://anthropic.claude/cb?x=1", "my-app+v2.test://cb"} {
		if err := CheckClientRedirectURI("redirect_uri", uri, false, true); err != nil {
			t.Errorf("public client, %q: %v; want accepted", uri, err)
		}
		if err := CheckClientRedirectURI("redirect_uri", uri, true, false); err == nil || !strings.Contains(err.Error(), "public client") {
			t.Errorf("confidential client, %q: %v; want refused as for public clients only", uri, err)
		}
	}
	for _, uri := range []string{
		"javascript:alert(1)//", "JavaScript://x/%0aalert(1)", "data:/text/html,x", "vbscript:/x", "file:///etc/passwd", "blob:/x",
		"about:/blank", "filesystem:/x", "view-source:/x", "ws://evil.example/x", "wss://evil.example/x", "ftp://evil.example/x",
		"chrome://settings/", "chrome-extension://abc/cb", "moz-extension://abc/cb", "mailto:/a", "intent://x/#Intent;end",
		"ms-msdt:/id%20PCWDiagnostic", "MS-Word://ofe/u", "search-ms://query=x", "jnlp://evil.example/app.jnlp",
		"com.example.app:oauth2redirect", "example.com:443/cb", "com.example.app:", "com.example.app:/", "com.example.app:/cb#f",
		"com.example.app://u@x/cb", "com.example.app:/cb/*", "com.example.app:/c b", "1app:/cb", "localhost:8080/cb",
	} {
		if err := CheckClientRedirectURI("redirect_uri", uri, true, true); err == nil {
			t.Errorf("%q accepted; want refused", uri)
		}
	}
	// The Caddyfile's clients: a public one may, a confidential one may not.
	if err := CheckClients([]Client{{ID: "native", Public: true, RedirectURIs: []string{nativeRedirect}, PostLogoutRedirectURIs: []string{"com.example.app:/signedout"}}}, false); err != nil {
		t.Errorf("a public static client with a private-use scheme: %v", err)
	}
	if err := CheckClients([]Client{{ID: "web", Secret: "s", RedirectURIs: []string{nativeRedirect}}}, true); err == nil {
		t.Error("a confidential static client with a private-use scheme was accepted")
	}
	// The portal and the admin API: on create and on update, by the client's kind.
	h := newHarness(t)
	ctx := context.Background()
	name := "Native"
	pub, _, err := h.svc.Clients().Create(ctx, ClientSpec{Name: &name, RedirectURIs: []string{cursorRedirect}, Public: true})
	if err != nil {
		t.Fatalf("a public dynamic client with a private-use scheme: %v", err)
	}
	if len(pub.AllowedOrigins) != 0 {
		t.Errorf("allowed origins %v; a private-use scheme has no web origin", pub.AllowedOrigins)
	}
	if _, err := h.svc.Clients().Update(ctx, pub.ID, "", ClientSpec{RedirectURIs: []string{nativeRedirect, cursorRedirect}}); err != nil {
		t.Errorf("updating the public client's URIs: %v", err)
	}
	if _, _, err := h.svc.Clients().Create(ctx, ClientSpec{Name: &name, RedirectURIs: []string{nativeRedirect}}); err == nil {
		t.Error("a confidential dynamic client with a private-use scheme was created")
	}
	conf, _, err := h.svc.Clients().Create(ctx, ClientSpec{Name: &name, RedirectURIs: []string{"https://web.example/cb"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []ClientSpec{{RedirectURIs: []string{nativeRedirect}}, {PostLogoutRedirectURIs: []string{nativeRedirect}}} {
		if _, err := h.svc.Clients().Update(ctx, conf.ID, "", spec); err == nil {
			t.Errorf("a confidential client updated to %+v", spec)
		}
	}
	// RFC 7591: a public registration may, a confidential one may not.
	h.openRegistration(RegistrationConfig{})
	if _, err := h.svc.Register(ctx, RegistrationRequest{RedirectURIs: []string{nativeRedirect}}, ""); err == nil {
		t.Error("a confidential self-registration with a private-use scheme was accepted")
	}
	for uri, name := range map[string]string{cursorRedirect: "anysphere.cursor-retrieval", nativeRedirect: "com.example.app"} {
		out := h.register(t, RegistrationRequest{RedirectURIs: []string{uri}, TokenEndpointAuthMethod: "none"}, "")
		if out.ClientName != name {
			t.Errorf("client_name of %q defaulted to %q; want %q", uri, out.ClientName, name)
		}
	}
}

// TestPrivateUseSchemeLogin: a self-registered public client with a private-use
// scheme logs in (the code goes to its URI with the state, matched exactly), and
// is refused form_post, which no app's scheme takes.
func TestPrivateUseSchemeLogin(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.openRegistration(RegistrationConfig{})
	out := h.register(t, RegistrationRequest{RedirectURIs: []string{cursorRedirect}, ClientName: "Cursor", TokenEndpointAuthMethod: "none"}, "")
	l := h.login(t, regParams(out.ClientID, cursorRedirect), "alice")
	resp, err := h.token("grant_type", "authorization_code", "client_id", out.ClientID, "code", l.code,
		"redirect_uri", cursorRedirect, "code_verifier", spaVerifier)
	if err != nil || resp.AccessToken == "" {
		t.Fatalf("code exchange = %+v, %v", resp, err)
	}
	for _, other := range []string{cursorRedirect + "/", "CURSOR://anysphere.cursor-retrieval/oauth/user-palmgate/callback", cursorRedirect + "?x=1"} {
		if _, err := h.svc.Authorize(ctx, regParams(out.ClientID, other), testBrowser); err == nil {
			t.Errorf("redirect_uri %q accepted; want an exact match only", other)
		}
	}
	p := regParams(out.ClientID, cursorRedirect)
	p.Set("response_mode", "form_post")
	_, err = h.svc.Authorize(ctx, p, testBrowser)
	back, ok := err.(*RedirectError)
	if !ok || back.ResponseMode != ResponseModeQuery || back.Fault.Code != ErrInvalidRequest || !back.Confirm {
		t.Fatalf("form_post to a private-use scheme = %v; want invalid_request in query mode, confirmed", err)
	}
	for uri, want := range map[string]string{cursorRedirect: "cursor://anysphere.cursor-retrieval", nativeRedirect: "com.example.app:",
		"https://app.example:8443/cb": "app.example:8443"} {
		if got := RedirectDestination(uri); got != want {
			t.Errorf("RedirectDestination(%q) = %q; want %q", uri, got, want)
		}
	}
}

// TestAnonymousClientPostLogoutRedirect (fourth review; RP-Initiated Logout 1.0
// 3.1): a self-registered client's and a metadata document's
// post_logout_redirect_uris are taken (they were ignored, so every logout to them
// was refused), validated as redirect URIs; a logout there without an
// id_token_hint of that client is to be confirmed (no open redirector); with one,
// it is not.
func TestAnonymousClientPostLogoutRedirect(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.openRegistration(RegistrationConfig{})
	const bye = "https://app.example.test/bye"
	out := h.register(t, RegistrationRequest{RedirectURIs: []string{regLoopback}, TokenEndpointAuthMethod: "none",
		PostLogoutRedirectURIs: []string{bye, nativeRedirect}}, "")
	if strings.Join(out.PostLogoutRedirectURIs, " ") != bye+" "+nativeRedirect {
		t.Fatalf("registration echo post_logout_redirect_uris = %v", out.PostLogoutRedirectURIs)
	}
	for _, bad := range []string{"http://evil.example/bye", "javascript:/x", "https://a.example/#f"} {
		if _, err := h.svc.Register(ctx, RegistrationRequest{RedirectURIs: []string{regLoopback}, TokenEndpointAuthMethod: "none",
			PostLogoutRedirectURIs: []string{bad}}, ""); err == nil {
			t.Errorf("post_logout_redirect_uri %q accepted", bad)
		}
	}
	lo, err := h.svc.EndSession(ctx, map[string][]string{"client_id": {out.ClientID}, "post_logout_redirect_uri": {bye}, "state": {"s1"}})
	if err != nil || lo.URL() != bye+"?state=s1" || !lo.Confirm {
		t.Fatalf("logout without hint = %+v, %v; want the URI, to be confirmed", lo, err)
	}
	l := h.login(t, regParams(out.ClientID, regLoopback), "alice")
	resp, err := h.token("grant_type", "authorization_code", "client_id", out.ClientID, "code", l.code,
		"redirect_uri", regLoopback, "code_verifier", spaVerifier)
	if err != nil {
		t.Fatal(err)
	}
	lo, err = h.svc.EndSession(ctx, map[string][]string{"id_token_hint": {resp.IDToken}, "post_logout_redirect_uri": {nativeRedirect}})
	if err != nil || lo.URL() != nativeRedirect || lo.Confirm || lo.GrantID == "" {
		t.Fatalf("logout with the client's hint = %+v, %v; want a redirect, not confirmed", lo, err)
	}
	// A metadata document's.
	h.svc.clients.metadata = &fakeDocs{docs: map[string]string{docURL: `{"client_id":"` + docURL + `","redirect_uris":["` + nativeRedirect + `"],"post_logout_redirect_uris":["` + bye + `"]}`}}
	lo, err = h.svc.EndSession(ctx, map[string][]string{"client_id": {docURL}, "post_logout_redirect_uri": {bye}})
	if err != nil || lo.URL() != bye || !lo.Confirm {
		t.Fatalf("metadata document client's logout = %+v, %v; want the URI, to be confirmed", lo, err)
	}
	h.svc.clients.metadata = &fakeDocs{docs: map[string]string{docURL: `{"client_id":"` + docURL + `","redirect_uris":["` + nativeRedirect + `"],"post_logout_redirect_uris":["javascript:/x"]}`}}
	if _, err := h.svc.EndSession(ctx, map[string][]string{"client_id": {docURL}}); err == nil {
		t.Error("a metadata document with a javascript post_logout_redirect_uri was served")
	}
}

// TestPrivateUseSchemeNeedsInteraction (fourth review; RFC 8252 8.6): any app
// may claim a private-use scheme, so one that sends a person's browser to
// palmgate with Cursor's client_id, redirect URI and its own PKCE challenge would
// get a code for its verifier at once from the SSO session once the person had
// consented to Cursor. palmgate answered such a request with a code, no page.
// Now every in-session request to a private-use scheme URI shows the consent
// page (prompt=none: consent_required); the scan is interaction enough.
func TestPrivateUseSchemeNeedsInteraction(t *testing.T) {
	h := newSSOHarness(t, ssoTTL)
	ctx := context.Background()
	h.openRegistration(RegistrationConfig{})
	out := h.register(t, RegistrationRequest{RedirectURIs: []string{cursorRedirect, regLoopback}, ClientName: "Cursor", TokenEndpointAuthMethod: "none"}, "")
	p := []string{"client_id", out.ClientID, "redirect_uri", cursorRedirect, "code_challenge", spaChallenge(), "code_challenge_method", "S256", "scope", "openid"}
	_, sess := h.scanLogin(t, p, "alice", "")
	ar, err := h.inSession(sess.ID, testBrowser, p...)
	if err != nil || ar.Status != RequestConsent || ar.Answer != nil {
		t.Fatalf("in-session request to a private-use scheme = %+v, %v; want the consent page, no code", ar, err)
	}
	st, err := h.svc.ConsentPage(ctx, ar.ID, testBinding)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := h.svc.Consent(ctx, ar.ID, testBinding, sess.ID, st.Token, true); err != nil || r.Code == "" || r.URI != cursorRedirect {
		t.Fatalf("Consent = %+v, %v; want a code to the app", r, err)
	}
	_, err = h.inSession(sess.ID, testBrowser, append(p, "prompt", "none")...)
	wantError(t, err, ErrConsentRequired)
	// Its loopback URI is answered from the session as before (RFC 8252 7.3).
	p[3] = regLoopback
	wantCode(t)(h.inSession(sess.ID, testBrowser, p...))
}
