package oidc

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/event/eventtest"
	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/internal/clocktest"
	"github.com/palmgate/palmgate/internal/keystest"
	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/memstore"
)

const ssoTTL = 12 * time.Hour

// otherBrowser is a second browser: its own login cookie.
var otherBrowser = Browser{Binding: strings.Repeat("o", 43), IP: "192.0.2.20", Summary: "Chrome on Windows"}

// newSSOHarness is newHarness with sso_session on (ttl; 0 is off).
func newSSOHarness(t *testing.T, ttl time.Duration) *harness {
	t.Helper()
	store := memstore.New()
	h := &harness{clock: clocktest.New(time.Now().Truncate(time.Second)), store: store}
	ctx := context.Background()
	var err error
	if h.palm, err = palm.NewService(palm.Config{Store: store, Now: h.clock.Now, Issuer: testIssuer, Dev: true}); err != nil {
		t.Fatalf("palm.NewService: %v", err)
	}
	if h.keys, err = keys.Open(ctx, store, h.clock.Now, keys.WithGenerator(keystest.Generator)); err != nil {
		t.Fatalf("keys.Open: %v", err)
	}
	h.svc, err = NewService(ctx, Config{
		Store: store, Palm: h.palm, Keys: h.keys, Now: h.clock.Now, Issuer: testIssuer,
		Clients: testClients, PairwiseSecret: testSecret,
		AccessTTL: accessTTL, RefreshTTL: refreshTTL, CodeTTL: codeTTL, LoginTTL: loginTTL, SSOSession: ttl,
	})
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	return h
}

// scanLogin runs a login with a palm scan of who, in the browser holding the SSO
// session old ("" for none), through the login page as the edge does; it returns
// the code and the session the scan started (nil with sso_session off).
func (h *harness) scanLogin(t *testing.T, p []string, who, old string) (login, *Session) {
	t.Helper()
	b := testBrowser
	b.Session = old
	ar, err := h.svc.Authorize(context.Background(), params(p...), b)
	if err != nil {
		t.Fatalf("Authorize: %v", err)
	}
	if ar.ChallengeID == "" || ar.Answer != nil {
		t.Fatalf("Authorize = %+v, want a palm challenge", ar)
	}
	humanID := h.scan(t, ar, who)
	step, err := h.svc.LoginPage(context.Background(), ar.ID, testBinding, LoginOptions{Renew: true, Finish: true, Session: old})
	if err != nil || step.Redirect == nil || step.Redirect.Code == "" {
		t.Fatalf("LoginPage = %+v, %v; want a code", step, err)
	}
	return login{code: step.Redirect.Code, humanID: humanID, ar: ar}, step.Session
}

// inSession sends an authorization request from the browser holding session.
func (h *harness) inSession(session string, b Browser, p ...string) (*AuthRequest, error) {
	b.Session = session
	return h.svc.Authorize(context.Background(), params(p...), b)
}

// wantCode fails unless ar was answered at once with a code (no scan, no page).
func wantCode(t *testing.T) func(*AuthRequest, error) string {
	return func(ar *AuthRequest, err error) string {
		t.Helper()
		if err != nil {
			t.Fatalf("Authorize: %v; want a code from the session", err)
		}
		if ar.Answer == nil || ar.Answer.Code == "" || ar.ChallengeID != "" {
			t.Fatalf("Authorize = %+v (answer %+v), want a code without a scan", ar, ar.Answer)
		}
		return ar.Answer.Code
	}
}

// wantScan fails unless ar waits for a new palm scan.
func wantScan(t *testing.T) func(*AuthRequest, error) {
	return func(ar *AuthRequest, err error) {
		t.Helper()
		if err != nil || ar.ChallengeID == "" || ar.Answer != nil || ar.Status != RequestPending {
			t.Fatalf("Authorize = %+v, %v; want a new palm scan", ar, err)
		}
	}
}

func TestSSOSessionAnswersWithoutScan(t *testing.T) {
	h := newSSOHarness(t, ssoTTL)
	ctx := context.Background()
	first, sess := h.scanLogin(t, nil, "alice", "")
	if sess == nil || !validSessionID(sess.ID) || !sess.ExpiresAt.Equal(h.clock.Now().Add(ssoTTL)) {
		t.Fatalf("session = %+v, want a 256-bit id until now+%s", sess, ssoTTL)
	}
	// The store holds the id's hash only.
	err := h.store.View(ctx, func(txn storage.Txn) error {
		return txn.Iterate([]byte("oidc/sso/"), func(k, v []byte) (bool, error) {
			if strings.Contains(string(k)+string(v), sess.ID) {
				t.Errorf("the store holds the session id in clear: %s", k)
			}
			return true, nil
		})
	})
	if err != nil || h.count(t, "oidc/sso/") != 1 {
		t.Fatalf("sessions stored: %d, %v; want 1", h.count(t, "oidc/sso/"), err)
	}
	scanTime := h.clock.Now()
	firstResp := h.exchange(t, first, "")
	var firstID IDClaims
	h.parseToken(t, firstResp.IDToken, keys.RS256, &firstID)
	h.clock.Advance(30 * time.Minute)

	// The first client again, with prompt=none: a code, no scan; auth_time is the
	// scan's; acr and amr say a palm was verified.
	ar, err := h.inSession(sess.ID, testBrowser, "prompt", "none", "nonce", "n-silent")
	code := wantCode(t)(ar, err)
	if ar.Answer.State != "st-123" || ar.Answer.Issuer != oauthIssuer || ar.Answer.URI != appRedirect {
		t.Errorf("answer %+v, want state, iss and the redirect_uri", ar.Answer)
	}
	resp, err := h.svc.ExchangeCode(ctx, "app", code, appRedirect, "")
	if err != nil {
		t.Fatalf("ExchangeCode: %v", err)
	}
	var id IDClaims
	h.parseToken(t, resp.IDToken, keys.RS256, &id)
	if id.AuthTime != scanTime.Unix() || id.ACR != ACRPalm || !slices.Equal(id.AMR, []string{AMRPalm}) || id.Nonce != "n-silent" {
		t.Errorf("ID token auth_time %d acr %q amr %v nonce %q; want the scan's time %d, %q, [palm], n-silent",
			id.AuthTime, id.ACR, id.AMR, id.Nonce, scanTime.Unix(), ACRPalm)
	}
	if id.Subject != firstID.Subject {
		t.Errorf("sub %s from the session, %s from the scan: want the same person", id.Subject, firstID.Subject)
	}

	// A second client: consent once, then a code; its sub is its own.
	ar, err = h.inSession(sess.ID, testBrowser, "client_id", "other", "redirect_uri", otherRedir, "prompt", "none")
	if oe := wantError(t, err, ErrConsentRequired); oe.RedirectURI != otherRedir || oe.State != "st-123" {
		t.Errorf("consent_required goes to %q state %q, want the client's", oe.RedirectURI, oe.State)
	}
	ar, err = h.inSession(sess.ID, testBrowser, "client_id", "other", "redirect_uri", otherRedir)
	if err != nil || ar.Status != RequestConsent || ar.ChallengeID != "" || ar.Answer != nil {
		t.Fatalf("Authorize(other) = %+v, %v; want a request waiting for consent", ar, err)
	}
	st, err := h.svc.ConsentPage(ctx, ar.ID, testBinding)
	if err != nil || !st.Bound || st.Token == "" || st.ClientName != "other" {
		t.Fatalf("ConsentPage = %+v, %v; want the bound form with its token", st, err)
	}
	r, err := h.svc.Consent(ctx, ar.ID, testBinding, sess.ID, st.Token, true)
	if err != nil || r.Code == "" || r.URI != otherRedir {
		t.Fatalf("Consent = %+v, %v; want a code for other", r, err)
	}
	otherResp, err := h.svc.ExchangeCode(ctx, "other", r.Code, otherRedir, "")
	if err != nil {
		t.Fatalf("ExchangeCode(other): %v", err)
	}
	var otherID IDClaims
	h.parseToken(t, otherResp.IDToken, keys.RS256, &otherID)
	if otherID.Subject == firstID.Subject || otherID.AuthTime != scanTime.Unix() {
		t.Errorf("other's sub %s auth_time %d; want a pairwise sub of its own and the scan's time", otherID.Subject, otherID.AuthTime)
	}
	// The consent is remembered: prompt=none now answers other with a code.
	wantCode(t)(h.inSession(sess.ID, testBrowser, "client_id", "other", "redirect_uri", otherRedir, "prompt", "none"))
}

func TestSSOSessionConsentRules(t *testing.T) {
	h := newSSOHarness(t, ssoTTL)
	_, sess := h.scanLogin(t, []string{"scope", "openid"}, "alice", "")
	// The scan consented to openid for app: the same scopes need no consent.
	wantCode(t)(h.inSession(sess.ID, testBrowser))
	for _, tc := range []struct {
		name string
		p    []string
	}{
		{"more scopes", []string{"scope", "openid profile"}},
		{"prompt=consent", []string{"prompt", "consent"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ar, err := h.inSession(sess.ID, testBrowser, tc.p...)
			if err != nil || ar.Status != RequestConsent {
				t.Fatalf("Authorize = %+v, %v; want the consent page", ar, err)
			}
			if tc.name != "prompt=consent" { // prompt=none stands alone
				_, err = h.inSession(sess.ID, testBrowser, append(tc.p, "prompt", "none")...)
				wantError(t, err, ErrConsentRequired)
			}
		})
	}
	// After consenting to openid profile, fewer scopes need no consent again.
	ar, err := h.inSession(sess.ID, testBrowser, "scope", "openid profile")
	if err != nil {
		t.Fatal(err)
	}
	st, err := h.svc.ConsentPage(context.Background(), ar.ID, testBinding)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Consent(context.Background(), ar.ID, testBinding, sess.ID, st.Token, true); err != nil {
		t.Fatal(err)
	}
	wantCode(t)(h.inSession(sess.ID, testBrowser, "scope", "openid profile", "prompt", "none"))
	wantCode(t)(h.inSession(sess.ID, testBrowser, "scope", "openid", "prompt", "none"))
}

func TestSSOSessionConsentForm(t *testing.T) {
	h := newSSOHarness(t, ssoTTL)
	ctx := context.Background()
	_, sess := h.scanLogin(t, nil, "alice", "")
	pending := func(t *testing.T) (*AuthRequest, string) {
		t.Helper()
		ar, err := h.inSession(sess.ID, testBrowser, "client_id", "other", "redirect_uri", otherRedir, "prompt", "consent")
		if err != nil || ar.Status != RequestConsent {
			t.Fatalf("Authorize = %+v, %v; want consent", ar, err)
		}
		st, err := h.svc.ConsentPage(ctx, ar.ID, testBinding)
		if err != nil {
			t.Fatal(err)
		}
		return ar, st.Token
	}
	t.Run("refusals change nothing", func(t *testing.T) {
		ar, token := pending(t)
		other, _ := pending(t)
		otherToken, _ := h.svc.ConsentPage(ctx, other.ID, testBinding)
		for _, tc := range []struct {
			name                    string
			binding, session, token string
			want                    error
		}{
			{"no token", testBinding, sess.ID, "", ErrBadConsentToken},
			{"wrong token", testBinding, sess.ID, strings.Repeat("x", 43), ErrBadConsentToken},
			{"another request's token", testBinding, sess.ID, otherToken.Token, ErrBadConsentToken},
			{"another browser", otherBrowser.Binding, sess.ID, token, ErrOtherBrowser},
			{"no login cookie", "", sess.ID, token, ErrOtherBrowser},
		} {
			if _, err := h.svc.Consent(ctx, ar.ID, tc.binding, tc.session, tc.token, true); !errors.Is(err, tc.want) {
				t.Errorf("%s: Consent error = %v, want %v", tc.name, err, tc.want)
			}
		}
		// Another browser's view of the page has no token.
		if st, err := h.svc.ConsentPage(ctx, ar.ID, otherBrowser.Binding); err != nil || st.Bound || st.Token != "" {
			t.Errorf("ConsentPage(other browser) = %+v, %v; want no token", st, err)
		}
		// The request still waits: the right form answers it, once.
		r, err := h.svc.Consent(ctx, ar.ID, testBinding, sess.ID, token, true)
		if err != nil || r.Code == "" {
			t.Fatalf("Consent = %+v, %v; want a code", r, err)
		}
		if _, err := h.svc.Consent(ctx, ar.ID, testBinding, sess.ID, token, true); err == nil {
			t.Error("a second Consent succeeded; want invalid_request")
		}
	})
	t.Run("deny", func(t *testing.T) {
		h.clock.Advance(time.Second)
		ar, err := h.inSession(sess.ID, testBrowser, "client_id", "third", "redirect_uri", "https://third.example.test/cb")
		if err != nil || ar.Status != RequestConsent {
			t.Fatalf("Authorize(third) = %+v, %v", ar, err)
		}
		st, _ := h.svc.ConsentPage(ctx, ar.ID, testBinding)
		r, err := h.svc.Consent(ctx, ar.ID, testBinding, sess.ID, st.Token, false)
		if err != nil || r.Error != ErrAccessDenied || r.Code != "" {
			t.Fatalf("Consent(deny) = %+v, %v; want access_denied", r, err)
		}
		// A denial remembers nothing.
		_, err = h.inSession(sess.ID, testBrowser, "client_id", "third", "redirect_uri", "https://third.example.test/cb", "prompt", "none")
		wantError(t, err, ErrConsentRequired)
	})
	t.Run("session ended before the form", func(t *testing.T) {
		ar, token := pending(t)
		if ended, err := h.svc.EndSSOSession(ctx, sess.ID); err != nil || !ended {
			t.Fatalf("EndSSOSession = %v, %v", ended, err)
		}
		r, err := h.svc.Consent(ctx, ar.ID, testBinding, sess.ID, token, true)
		if err != nil || r.Error != ErrLoginRequired || r.Code != "" {
			t.Fatalf("Consent after logout = %+v, %v; want login_required", r, err)
		}
	})
}

func TestSSOSessionForcesScan(t *testing.T) {
	h := newSSOHarness(t, ssoTTL)
	_, sess := h.scanLogin(t, nil, "alice", "")
	h.clock.Advance(10 * time.Minute)
	for _, tc := range []struct {
		name string
		p    []string
		scan bool
	}{
		{"max_age within", []string{"max_age", "3600"}, false},
		{"max_age passed", []string{"max_age", "60"}, true},
		{"max_age=0", []string{"max_age", "0"}, true},
		{"prompt=login", []string{"prompt", "login"}, true},
		{"prompt=login consent", []string{"prompt", "login consent"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ar, err := h.inSession(sess.ID, testBrowser, tc.p...)
			if !tc.scan {
				wantCode(t)(ar, err)
				return
			}
			wantScan(t)(ar, err)
			if slices.Contains(tc.p, "max_age") {
				_, err = h.inSession(sess.ID, testBrowser, append(tc.p, "prompt", "none")...)
				wantError(t, err, ErrLoginRequired)
			}
		})
	}
	for name, b := range map[string]string{"no session": "", "another browser's guess": strings.Repeat("A", 43), "malformed": "short"} {
		t.Run(name, func(t *testing.T) {
			wantScan(t)(h.inSession(b, otherBrowser))
			_, err := h.inSession(b, otherBrowser, "prompt", "none")
			wantError(t, err, ErrLoginRequired)
		})
	}
}

func TestSSOSessionEnds(t *testing.T) {
	h := newSSOHarness(t, ssoTTL)
	ctx := context.Background()
	t.Run("expiry", func(t *testing.T) {
		_, sess := h.scanLogin(t, nil, "alice", "")
		h.clock.Advance(ssoTTL - time.Second)
		wantCode(t)(h.inSession(sess.ID, testBrowser, "prompt", "none"))
		h.clock.Advance(time.Second)
		_, err := h.inSession(sess.ID, testBrowser, "prompt", "none")
		wantError(t, err, ErrLoginRequired)
		wantScan(t)(h.inSession(sess.ID, testBrowser))
	})
	t.Run("logout", func(t *testing.T) {
		_, sess := h.scanLogin(t, nil, "alice", "")
		wantCode(t)(h.inSession(sess.ID, testBrowser, "prompt", "none"))
		if ended, err := h.svc.EndSSOSession(ctx, sess.ID); err != nil || !ended {
			t.Fatalf("EndSSOSession = %v, %v; want ended", ended, err)
		}
		_, err := h.inSession(sess.ID, testBrowser, "prompt", "none")
		wantError(t, err, ErrLoginRequired)
		if ended, err := h.svc.EndSSOSession(ctx, sess.ID); err != nil || ended {
			t.Errorf("EndSSOSession again = %v, %v; want nothing ended", ended, err)
		}
		if ended, err := h.svc.EndSSOSession(ctx, "not-a-session"); err != nil || ended {
			t.Errorf("EndSSOSession(malformed) = %v, %v; want nothing ended", ended, err)
		}
	})
	t.Run("a new scan starts a new session", func(t *testing.T) {
		_, old := h.scanLogin(t, nil, "alice", "")
		_, fresh := h.scanLogin(t, []string{"prompt", "login"}, "bob", old.ID)
		if fresh == nil || fresh.ID == old.ID {
			t.Fatalf("session after a new scan = %+v, want a new id", fresh)
		}
		_, err := h.inSession(old.ID, testBrowser, "prompt", "none")
		wantError(t, err, ErrLoginRequired)
		code := wantCode(t)(h.inSession(fresh.ID, testBrowser, "prompt", "none"))
		resp, err := h.svc.ExchangeCode(ctx, "app", code, appRedirect, "")
		if err != nil {
			t.Fatal(err)
		}
		var id IDClaims
		h.parseToken(t, resp.IDToken, keys.RS256, &id)
		bob := h.humanOf(t, "bob")
		if id.Subject != PairwiseSubject([]byte(testSecret), "app", bob) {
			t.Errorf("sub %s: want bob's, who scanned last", id.Subject)
		}
	})
}

// humanOf is the human id of palm subject who (logged in before).
func (h *harness) humanOf(t *testing.T, who string) string {
	t.Helper()
	ar := h.authorize(t, params("prompt", "login"))
	return h.scan(t, ar, who)
}

func TestSSOSessionOff(t *testing.T) {
	h := newSSOHarness(t, 0)
	_, sess := h.scanLogin(t, nil, "alice", "")
	if sess != nil {
		t.Fatalf("sso_session off started a session: %+v", sess)
	}
	if n := h.count(t, "oidc/sso/") + h.count(t, "oidc/consent/"); n != 0 {
		t.Errorf("sso_session off stored %d session or consent records", n)
	}
	_, err := h.inSession(strings.Repeat("A", 43), testBrowser, "prompt", "none")
	wantError(t, err, ErrLoginRequired)
}

// TestSSOSessionLoginEvents: a login the session answers is a login started and
// completed (with the person), and one that waits for consent is started, then
// completed or denied by the consent form: the login metrics and the audit log
// count logins without a scan as they count the others.
func TestSSOSessionLoginEvents(t *testing.T) {
	h := newSSOHarness(t, ssoTTL)
	l, sess := h.scanLogin(t, []string{"scope", "openid"}, "alice", "")
	var rec eventtest.Recorder
	h.svc.events = rec.Sink()
	ctx := context.Background()
	ev := func(o event.Outcome, humanID string) event.Event {
		return event.Event{Kind: event.Login, Outcome: o, ClientID: "app", HumanID: humanID}
	}
	wantCode(t)(h.inSession(sess.ID, testBrowser))
	wantEvents(t, &rec, "answered by the session", ev(event.Started, ""), ev(event.Completed, l.humanID))
	for _, allow := range []bool{true, false} {
		ar, err := h.inSession(sess.ID, testBrowser, "prompt", "consent")
		if err != nil || ar.Status != RequestConsent {
			t.Fatalf("Authorize = %+v, %v; want the consent page", ar, err)
		}
		wantEvents(t, &rec, "waiting for consent", ev(event.Started, ""))
		st, err := h.svc.ConsentPage(ctx, ar.ID, testBinding)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.svc.Consent(ctx, ar.ID, testBinding, sess.ID, st.Token, allow); err != nil {
			t.Fatal(err)
		}
		want := ev(event.Completed, l.humanID)
		if !allow {
			want.Outcome = event.Denied
		}
		wantEvents(t, &rec, "consent answered", want)
	}
}
