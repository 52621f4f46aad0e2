package oidc

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/storage"
)

const appBackchannel = "https://app.example.test/backchannel"

// sentLogouts records what the service hands its LogoutSender.
type sentLogouts struct {
	mu   sync.Mutex
	list []BackchannelLogout
}

func (s *sentLogouts) Send(l BackchannelLogout) {
	if l.Prepare != nil && l.URI != "" { // not a metadata client's: sign it now
		_, token, err := l.Prepare(context.Background())
		if err == nil {
			l.Token = token
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = append(s.list, l)
}

// take returns what was sent since the last take.
func (s *sentLogouts) take() []BackchannelLogout {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.list
	s.list = nil
	return out
}

// withBackchannel gives the static clients ids a backchannel_logout_uri and the
// service a recording sender.
func withBackchannel(h *harness, ids ...string) *sentLogouts {
	for _, id := range ids {
		h.svc.clients.byID[id].backchannelLogoutURI = appBackchannel + "/" + id
	}
	sent := &sentLogouts{}
	h.svc.logoutSender = sent
	return sent
}

// idClaims reads an ID token's claims, unverified (the tests' own tokens).
func idClaims(t *testing.T, token string) IDClaims {
	t.Helper()
	var c IDClaims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestBackchannelLogoutToken: the logout token of an RP-initiated logout is
// signed with the client's ID token algorithm by palmgate's keys, typ
// logout+jwt, with every claim of BCL 2.4 (sub and sid those of the client's ID
// token, exp two minutes after iat, the event) and no nonce.
func TestBackchannelLogoutToken(t *testing.T) {
	for _, tc := range []struct{ client, redirect, alg string }{
		{"app", appRedirect, keys.RS256},
		{"es-app", esRedirect, keys.ES256},
		{"ed-app", edRedirect, keys.EdDSA},
	} {
		t.Run(tc.client, func(t *testing.T) {
			h := newHarness(t)
			sent := withBackchannel(h, tc.client)
			tok := h.exchange(t, h.login(t, params("client_id", tc.client, "redirect_uri", tc.redirect), "alice"), "")
			id := idClaims(t, tok.IDToken)
			if _, err := h.svc.EndSession(context.Background(), url.Values{"id_token_hint": {tok.IDToken}}); err != nil {
				t.Fatalf("EndSession: %v", err)
			}
			got := sent.take()
			if len(got) != 1 {
				t.Fatalf("logout tokens sent: %d; want 1", len(got))
			}
			l := got[0]
			if l.ClientID != tc.client || l.URI != appBackchannel+"/"+tc.client || l.Restricted {
				t.Errorf("sent %+v; want client %s, its URI, not restricted (an operator's client)", l, tc.client)
			}
			var claims jwt.MapClaims
			header := h.parseToken(t, l.Token, tc.alg, &claims)
			if header["typ"] != "logout+jwt" {
				t.Errorf("typ = %v; want logout+jwt", header["typ"])
			}
			if aud, _ := claims.GetAudience(); len(aud) != 1 || aud[0] != tc.client {
				t.Errorf("aud = %v; want [%s]", aud, tc.client)
			}
			if claims["sub"] != id.Subject || claims["sid"] != id.GrantID || id.GrantID == "" {
				t.Errorf("sub, sid = %v, %v; want the ID token's %s, %s", claims["sub"], claims["sid"], id.Subject, id.GrantID)
			}
			iat, _ := claims.GetIssuedAt()
			exp, _ := claims.GetExpirationTime()
			if iat == nil || exp == nil || !iat.Equal(h.clock.Now()) || exp.Sub(iat.Time) != LogoutTokenTTL {
				t.Errorf("iat, exp = %v, %v; want now and two minutes later", iat, exp)
			}
			if jti, _ := claims["jti"].(string); jti == "" {
				t.Error("no jti")
			}
			events, _ := claims["events"].(map[string]any)
			if ev, ok := events[BackchannelLogoutEvent].(map[string]any); len(events) != 1 || !ok || len(ev) != 0 {
				t.Errorf("events = %v; want {%q: {}}", claims["events"], BackchannelLogoutEvent)
			}
			if _, ok := claims["nonce"]; ok {
				t.Error("a logout token carries a nonce (BCL 2.4 forbids it)")
			}
			// The claims' JSON itself: nothing but these.
			payload, _ := base64.RawURLEncoding.DecodeString(strings.Split(l.Token, ".")[1])
			var raw map[string]json.RawMessage
			_ = json.Unmarshal(payload, &raw)
			for k := range raw {
				switch k {
				case "iss", "aud", "iat", "exp", "jti", "sub", "sid", "events":
				default:
					t.Errorf("unexpected claim %q", k)
				}
			}
		})
	}
}

// TestBackchannelLogoutWhen: which ends of a login notify its client, once per
// grant ended, and which do not.
func TestBackchannelLogoutWhen(t *testing.T) {
	ctx := context.Background()
	sids := func(ls []BackchannelLogout) []string {
		var out []string
		for _, l := range ls {
			out = append(out, l.ClientID+":"+(&harness{}).sidOf(t, l.Token))
		}
		return out
	}
	t.Run("RP-initiated logout, once", func(t *testing.T) {
		h := newHarness(t)
		sent := withBackchannel(h, "app")
		tok := h.offlineLogin(t)
		for range 2 { // the second ends nothing new
			if _, err := h.svc.EndSession(ctx, url.Values{"id_token_hint": {tok.IDToken}}); err != nil {
				t.Fatal(err)
			}
		}
		if got := sids(sent.take()); len(got) != 1 || got[0] != "app:"+idClaims(t, tok.IDToken).GrantID {
			t.Errorf("sent %v; want one for the hint's grant", got)
		}
	})
	t.Run("the client's own revocation: none", func(t *testing.T) {
		h := newHarness(t)
		sent := withBackchannel(h, "app")
		tok := h.offlineLogin(t)
		if err := h.svc.Revoke(ctx, "app", tok.RefreshToken); err != nil {
			t.Fatal(err)
		}
		if got := sent.take(); len(got) != 0 {
			t.Errorf("the client's own revocation sent %d logout tokens; want none", len(got))
		}
	})
	t.Run("a client without a URI: none", func(t *testing.T) {
		h := newHarness(t)
		sent := withBackchannel(h, "other")
		tok := h.offlineLogin(t) // app's, which has no URI here
		if _, err := h.svc.EndSession(ctx, url.Values{"id_token_hint": {tok.IDToken}}); err != nil {
			t.Fatal(err)
		}
		if got := sent.take(); len(got) != 0 {
			t.Errorf("sent %d logout tokens for a client without backchannel_logout_uri", len(got))
		}
	})
	t.Run("refresh token reuse", func(t *testing.T) {
		h := newHarness(t)
		sent := withBackchannel(h, "app")
		tok := h.offlineLogin(t)
		h.refresh(t, "app", tok.RefreshToken, "")
		for range 2 {
			if _, err := h.svc.Refresh(ctx, "app", tok.RefreshToken, ""); err == nil {
				t.Fatal("a rotated refresh token worked")
			}
		}
		if got := sids(sent.take()); len(got) != 1 || got[0] != "app:"+idClaims(t, tok.IDToken).GrantID {
			t.Errorf("sent %v; want one for the revoked family", got)
		}
	})
	t.Run("code reuse", func(t *testing.T) {
		h := newHarness(t)
		sent := withBackchannel(h, "app")
		l := h.login(t, params("scope", "openid offline_access"), "alice")
		tok := h.exchange(t, l, "")
		if _, err := h.svc.ExchangeCode(ctx, "app", l.code, appRedirect, ""); err == nil {
			t.Fatal("a used code worked")
		}
		if got := sids(sent.take()); len(got) != 1 || got[0] != "app:"+idClaims(t, tok.IDToken).GrantID {
			t.Errorf("sent %v; want one for the code's grant", got)
		}
	})
	t.Run("the operator ends the person", func(t *testing.T) {
		h := newHarness(t)
		sent := withBackchannel(h, "app", "es-app")
		a1, a2 := h.offlineLogin(t), h.offlineLogin(t)
		es := h.exchange(t, h.login(t, params("client_id", "es-app", "redirect_uri", esRedirect), "alice"), "")
		other := h.exchange(t, h.login(t, params("client_id", "other", "redirect_uri", otherRedir), "alice"), "")
		bob := h.exchange(t, h.login(t, params("scope", "openid offline_access"), "bob"), "")
		alice := idClaims(t, a1.IDToken)
		humanID, err := h.svc.HumanBySubject(ctx, "app", alice.Subject)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.svc.EndHuman(ctx, humanID, EndHumanOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := sent.take(); len(got) != 0 {
			t.Errorf("ending the sessions alone (no revoke) sent %d logout tokens; the grants live on", len(got))
		}
		if _, err := h.svc.EndHuman(ctx, humanID, EndHumanOptions{Revoke: true}); err != nil {
			t.Fatal(err)
		}
		got := sids(sent.take())
		want := map[string]bool{"app:" + alice.GrantID: true, "app:" + idClaims(t, a2.IDToken).GrantID: true,
			"es-app:" + idClaims(t, es.IDToken).GrantID: true}
		if len(got) != len(want) {
			t.Errorf("sent %v; want one for each of %v", got, want)
		}
		for _, g := range got {
			if !want[g] {
				t.Errorf("sent %s; want only %v (not other's, which has no URI, nor bob's)", g, want)
			}
			delete(want, g)
		}
		_, _ = other, bob
		if _, err := h.svc.EndHuman(ctx, humanID, EndHumanOptions{Revoke: true}); err != nil {
			t.Fatal(err)
		}
		if got := sent.take(); len(got) != 0 {
			t.Errorf("ending the person again sent %d logout tokens; their grants had ended", len(got))
		}
	})
	t.Run("only after the commit", func(t *testing.T) {
		h := newHarness(t)
		sent := withBackchannel(h, "app")
		tok := h.offlineLogin(t)
		humanID, err := h.svc.HumanBySubject(ctx, "app", idClaims(t, tok.IDToken).Subject)
		if err != nil {
			t.Fatal(err)
		}
		boom := errors.New("boom")
		if _, err := h.svc.EndHuman(ctx, humanID, EndHumanOptions{Revoke: true, Also: func(storage.Txn) error { return boom }}); !errors.Is(err, boom) {
			t.Fatalf("EndHuman = %v; want boom", err)
		}
		if got := sent.take(); len(got) != 0 {
			t.Errorf("a failed end sent %d logout tokens; nothing ended", len(got))
		}
		h.refresh(t, "app", tok.RefreshToken, "") // still live
	})
}

// sidOf is the sid of a logout token (unverified: TestBackchannelLogoutToken
// verifies them).
func (*harness) sidOf(t *testing.T, token string) string {
	t.Helper()
	var c LogoutClaims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &c); err != nil {
		t.Fatal(err)
	}
	return c.SID
}

// TestCheckBackchannelLogoutURI: BCL 2.2's rules, https for a client that is
// not the operator's unless on a loopback host.
func TestCheckBackchannelLogoutURI(t *testing.T) {
	for _, tc := range []struct {
		uri                string
		operator, selfOnly bool // ok for the operator; ok for a self-registered client
	}{
		{"https://app.example.com/bcl", true, true},
		{"https://app.example.com/bcl?logout=backchannel", true, true},
		// Not a developer's (2026-11-27): the loopback host is palmgate's own,
		// which its POST reaches only with allow_private, and then any plain
		// http service there (Caddy's admin API: POST /stop).
		{"http://127.0.0.1:8080/bcl", true, false},
		{"http://localhost/bcl", true, false},
		{"http://localhost:2019/stop", true, false},
		{"http://[::1]:2019/stop", true, false},
		{"http://intranet.corp/bcl", true, false},
		{"https://app.example.com/bcl#frag", false, false},
		{"https://app.example.com/bcl#", false, false},
		{"/relative", false, false},
		{"ftp://app.example.com/x", false, false},
		{"javascript:alert(1)", false, false},
		{"https://user:pw@app.example.com/", false, false},
		{"https:///nohost", false, false},
		// A URI no POST can reach (2026-11-27): accepted, then failed for ever.
		{"https://:443/bcl", false, false},
		{"https://app.example.com:99999/bcl", false, false},
		{"https://app.example.com:0/bcl", false, false},
		{"https://app.example.com:/bcl", true, true},
		{"https://app.example.com:8443/bcl", true, true},
	} {
		if err := CheckBackchannelLogoutURI(tc.uri, true); (err == nil) != tc.operator {
			t.Errorf("operator %q: %v; want ok %v", tc.uri, err, tc.operator)
		}
		if err := CheckBackchannelLogoutURI(tc.uri, false); (err == nil) != tc.selfOnly {
			t.Errorf("self-registered %q: %v; want ok %v", tc.uri, err, tc.selfOnly)
		}
	}
}

// TestBackchannelLogoutURIOfDynamicClients: the operator's dynamic client may
// name an http URI on any host; a developer's or a self-registered one needs
// https (http not even on a loopback host, palmgate's own); a self-registered one's logout tokens go out
// Restricted (the sender checks the address), and the registration answers
// backchannel_logout_session_required.
func TestBackchannelLogoutURIOfDynamicClients(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	sent := withBackchannel(h)
	reg := h.svc.Clients()
	name, intranet, public := "Intranet", "http://intranet.corp/bcl", "https://app.example.test/bcl"
	op, _, err := reg.Create(ctx, ClientSpec{Name: &name, RedirectURIs: []string{appRedirect}, BackchannelLogoutURI: &intranet})
	if err != nil || op.BackchannelLogoutURI != intranet {
		t.Fatalf("operator's create with %s = %+v, %v; want it kept", intranet, op, err)
	}
	if _, _, err := reg.Create(ctx, ClientSpec{Name: &name, RedirectURIs: []string{appRedirect}, Owner: "dev-1", BackchannelLogoutURI: &intranet}); err == nil {
		t.Error("a developer's client was given an http backchannel_logout_uri on a non-loopback host")
	}
	dev, _, err := reg.Create(ctx, ClientSpec{Name: &name, RedirectURIs: []string{appRedirect}, Owner: "dev-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Update(ctx, dev.ID, "dev-1", ClientSpec{BackchannelLogoutURI: &intranet}); err == nil {
		t.Error("a developer's update set an http backchannel_logout_uri on a non-loopback host")
	}
	if got, err := reg.Update(ctx, dev.ID, "dev-1", ClientSpec{BackchannelLogoutURI: &public}); err != nil || got.BackchannelLogoutURI != public {
		t.Errorf("a developer's update to %s = %+v, %v", public, got, err)
	}
	frag := "https://app.example.test/bcl#x"
	if _, err := reg.Update(ctx, op.ID, "", ClientSpec{BackchannelLogoutURI: &frag}); err == nil {
		t.Error("a backchannel_logout_uri with a fragment was accepted")
	}

	h.openRegistration(RegistrationConfig{})
	if _, err := h.svc.Register(ctx, RegistrationRequest{RedirectURIs: []string{appRedirect}, BackchannelLogoutURI: intranet}, regAddress); err == nil {
		t.Error("a self-registered client was given an http backchannel_logout_uri on a non-loopback host")
	}
	out := h.register(t, RegistrationRequest{RedirectURIs: []string{appRedirect}, BackchannelLogoutURI: public}, regAddress)
	if out.BackchannelLogoutURI != public || !out.BackchannelLogoutSessionRequired {
		t.Fatalf("registration = %+v; want the URI and backchannel_logout_session_required", out)
	}
	tok := h.exchange(t, h.login(t, params("client_id", out.ClientID, "scope", "openid offline_access"), "alice"), "")
	_ = tok
	if _, err := h.svc.EndSession(ctx, url.Values{"id_token_hint": {tok.IDToken}}); err != nil {
		t.Fatal(err)
	}
	got := sent.take()
	if len(got) != 1 || got[0].URI != public || !got[0].Restricted || got[0].ClientID != out.ClientID {
		t.Errorf("sent %+v; want one, restricted, to %s", got, public)
	}
}

// blockedDocs is a metadata document host that answers nothing until its
// caller gives up.
type blockedDocs struct{ asked chan string }

func (b blockedDocs) Fetch(ctx context.Context, id string) ([]byte, error) {
	b.asked <- id
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestBackchannelLogoutMetadataClientNotFetchedInline (2026-11-27): the
// end of a person who used a metadata-document client does not wait for that
// client's document (a host that answers slowly, 5 s each, one per client):
// the sender fetches it, off the request; what it then sends is the client's
// logout token to the document's URI.
func TestBackchannelLogoutMetadataClientNotFetchedInline(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	sent := withBackchannel(h)
	bcl := "https://mcp.example.test/bcl"
	docs := &fakeDocs{docs: map[string]string{docURL: `{"client_id":"` + docURL + `","redirect_uris":["` + regLoopback + `"],"backchannel_logout_uri":"` + bcl + `"}`}}
	h.svc.clients.metadata = docs
	l := h.login(t, regParams(docURL, regLoopback), "alice")
	resp, err := h.token("grant_type", "authorization_code", "client_id", docURL, "code", l.code,
		"redirect_uri", regLoopback, "code_verifier", spaVerifier)
	if err != nil {
		t.Fatal(err)
	}
	blocked := blockedDocs{asked: make(chan string, 10)}
	h.svc.clients.metadata = blocked
	endCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := h.svc.EndHuman(endCtx, l.humanID, EndHumanOptions{Revoke: true})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case id := <-blocked.asked:
		cancel()
		<-done
		t.Fatalf("ending the person waited for the metadata document of %s", id)
	}
	got := sent.take()
	if len(got) != 1 || got[0].ClientID != docURL || !got[0].Restricted || got[0].Prepare == nil {
		t.Fatalf("sent %+v; want one restricted logout of %s, prepared by the sender", got, docURL)
	}
	h.svc.clients.metadata = docs
	uri, token, err := got[0].Prepare(ctx)
	if err != nil || uri != bcl {
		t.Fatalf("Prepare = %q, %v; want %s", uri, err, bcl)
	}
	var c LogoutClaims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &c); err != nil {
		t.Fatal(err)
	}
	if c.SID != idClaims(t, resp.IDToken).GrantID || len(c.Audience) != 1 || c.Audience[0] != docURL {
		t.Errorf("logout token sid %q aud %v; want the login's sid and %s", c.SID, c.Audience, docURL)
	}
}

// logoutTokenOf is the token the sender would POST now: signed by Prepare when
// the logout has one.
func logoutTokenOf(t *testing.T, l BackchannelLogout) string {
	t.Helper()
	if l.Prepare == nil {
		return l.Token
	}
	_, token, err := l.Prepare(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// TestBackchannelLogoutTokenFreshWhenSent (2026-11-27): a logout token is
// signed when the sender takes it from its queue, not when the login ended: one
// that waited behind others (a thousand people ended at once, a relying party
// answering slowly) is not already past its exp (2 minutes) when it arrives.
func TestBackchannelLogoutTokenFreshWhenSent(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	sent := &sentLogouts{}
	h.svc.clients.byID["app"].backchannelLogoutURI = appBackchannel + "/app"
	h.svc.logoutSender = sent
	tok := h.offlineLogin(t)
	alice := idClaims(t, tok.IDToken)
	humanID, err := h.svc.HumanBySubject(ctx, "app", alice.Subject)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.EndHuman(ctx, humanID, EndHumanOptions{Revoke: true}); err != nil {
		t.Fatal(err)
	}
	got := sent.list
	if len(got) != 1 {
		t.Fatalf("sent %d; want 1", len(got))
	}
	h.clock.Advance(10 * time.Minute) // in the queue
	var c LogoutClaims
	if _, _, err := jwt.NewParser().ParseUnverified(logoutTokenOf(t, got[0]), &c); err != nil {
		t.Fatal(err)
	}
	if now := h.clock.Now(); !c.ExpiresAt.After(now) || c.SID != alice.GrantID {
		t.Errorf("the token sent 10 minutes after the end: exp %v, now %v, sid %q; want a live token of sid %q", c.ExpiresAt, now, c.SID, alice.GrantID)
	}
}
