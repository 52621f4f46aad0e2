package oidc

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/event/eventtest"
	"github.com/palmgate/palmgate/storage"
)

func ptr[T any](v T) *T { return &v }

func (h *harness) createClient(t *testing.T, owner string, uris ...string) (*ClientInfo, string) {
	t.Helper()
	ci, secret, err := h.svc.Clients().Create(context.Background(), ClientSpec{Name: ptr("Dyn App"), RedirectURIs: uris, Owner: owner})
	if err != nil {
		t.Fatalf("CreateClient: %v", err)
	}
	return ci, secret
}

// auth authenticates a client as the introspection and revocation endpoints do.
func (h *harness) auth(id, secret string) error {
	_, err := h.svc.Authenticate(context.Background(), ClientRequest{Params: url.Values{"client_id": {id}, "client_secret": {secret}}})
	return err
}

func TestDynamicClientLogin(t *testing.T) {
	h := newHarness(t)
	ci, secret := h.createClient(t, "dev-1", appRedirect)
	if len(secret) != 43 || !validClientID(ci.ID) || ci.Sector != ci.ID {
		t.Fatalf("created %+v with secret %q", ci, secret)
	}
	if err := h.auth(ci.ID, secret); err != nil {
		t.Fatalf("authenticating with the new secret: %v", err)
	}
	if err := h.auth(ci.ID, secret+"x"); err == nil {
		t.Fatal("a wrong secret authenticated")
	}
	l := h.login(t, params("client_id", ci.ID, "scope", "openid offline_access"), "alice")
	resp := h.exchange(t, l, "")
	if resp.RefreshToken == "" {
		t.Fatal("no refresh token")
	}
	if got := h.svc.ClientName(l.ar); got != "Dyn App" {
		t.Errorf("ClientName = %q", got)
	}
	// The record holds no secret in clear.
	b := h.rawClient(t, ci.ID)
	if strings.Contains(b, secret) {
		t.Error("the stored record contains the secret")
	}
	// Deleting it revokes its refresh token and refuses it everywhere.
	if err := h.svc.Clients().Delete(context.Background(), ci.ID, "dev-2"); !errors.Is(err, ErrClientNotFound) {
		t.Fatalf("another owner's delete = %v, want ErrClientNotFound", err)
	}
	if err := h.svc.Clients().Delete(context.Background(), ci.ID, "dev-1"); err != nil {
		t.Fatalf("DeleteClient: %v", err)
	}
	if _, err := h.svc.Refresh(context.Background(), ci.ID, resp.RefreshToken, ""); err == nil {
		t.Fatal("the deleted client's refresh token still works")
	}
	if _, err := h.svc.access.Verify(context.Background(), resp.AccessToken); err == nil {
		t.Error("the deleted client's access token still verifies")
	}
	if err := h.auth(ci.ID, secret); err == nil {
		t.Error("the deleted client still authenticates")
	}
	if _, err := h.svc.Authorize(context.Background(), params("client_id", ci.ID), testBrowser); err == nil {
		t.Error("the deleted client can still start a login")
	}
}

func (h *harness) rawClient(t *testing.T, id string) string {
	t.Helper()
	rec, err := h.svc.clients.getRecord(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, s := range rec.Secrets {
		sb.Write(s.MAC)
	}
	return sb.String() + strings.Join(rec.RedirectURIs, " ") + rec.Name
}

func TestRotateClientSecretGrace(t *testing.T) {
	h := newHarness(t)
	ci, old := h.createClient(t, "", appRedirect)
	_, fresh, err := h.svc.Clients().RotateSecret(context.Background(), ci.ID, "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{old, fresh} {
		if err := h.auth(ci.ID, s); err != nil {
			t.Errorf("within the grace period: %v", err)
		}
	}
	h.clock.Advance(time.Hour)
	if err := h.auth(ci.ID, old); err == nil {
		t.Error("the old secret works after its grace period")
	}
	if err := h.auth(ci.ID, fresh); err != nil {
		t.Errorf("the new secret: %v", err)
	}
	_, third, err := h.svc.Clients().RotateSecret(context.Background(), ci.ID, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if h.auth(ci.ID, fresh) == nil || h.auth(ci.ID, third) != nil {
		t.Error("grace 0: the previous secret must stop at once, the new one work")
	}
}

// TestRotationEndsOlderSecrets: a rotation with grace G ends every older secret at
// the latest G from now; grace 0 after a graced rotation leaves only the new
// secret, and many graced rotations leave at most two live secrets (issue 18,
// finding 1).
func TestRotationEndsOlderSecrets(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	ci, s1 := h.createClient(t, "", appRedirect)
	if got, _ := h.svc.Clients().Get(ctx, ci.ID); len(got.Secrets) != 1 || !got.Secrets[0].Current || !got.PreviousSecretExpiresAt.IsZero() {
		t.Fatalf("a new client shows secrets %+v, previous until %v", got.Secrets, got.PreviousSecretExpiresAt)
	}
	_, s2, err := h.svc.Clients().RotateSecret(ctx, ci.ID, "", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Minute)
	info, s3, err := h.svc.Clients().RotateSecret(ctx, ci.ID, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]string{"S1": s1, "S2": s2} {
		if h.auth(ci.ID, s) == nil {
			t.Errorf("%s still authenticates after a rotation with grace 0", name)
		}
	}
	if err := h.auth(ci.ID, s3); err != nil {
		t.Errorf("the new secret: %v", err)
	}
	if len(info.Secrets) != 1 || !info.Secrets[0].Current || !info.PreviousSecretExpiresAt.IsZero() {
		t.Errorf("after grace 0 the answer shows secrets %+v, previous until %v; want the current one only", info.Secrets, info.PreviousSecretExpiresAt)
	}

	// 30 rotations with the longest grace: the current and the one before only.
	var all []string
	for range 30 {
		_, s, err := h.svc.Clients().RotateSecret(ctx, ci.ID, "", MaxSecretGrace)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, s)
		h.clock.Advance(time.Second)
	}
	live := 0
	for _, s := range append(all, s3) {
		if h.auth(ci.ID, s) == nil {
			live++
		}
	}
	if live != 2 || h.auth(ci.ID, all[29]) != nil || h.auth(ci.ID, all[28]) != nil {
		t.Errorf("after 30 rotations %d secrets authenticate; want the last two", live)
	}
	rec, err := h.svc.clients.getRecord(ctx, ci.ID)
	if err != nil || len(rec.Secrets) != 2 {
		t.Fatalf("the record keeps %d secrets (%v); want 2", len(rec.Secrets), err)
	}
	got, err := h.svc.Clients().Get(ctx, ci.ID)
	want := h.clock.Now().Add(-time.Second + MaxSecretGrace).UTC()
	if err != nil || len(got.Secrets) != 2 || !got.Secrets[0].Current || !got.Secrets[1].ExpiresAt.Equal(want) || !got.PreviousSecretExpiresAt.Equal(want) {
		t.Errorf("GetClient shows %+v (%v); want the current secret and the previous one until %v", got, err, want)
	}

	// A shorter grace cuts a longer one short: the previous secret ends at now+G.
	_, last, err := h.svc.Clients().RotateSecret(ctx, ci.ID, "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Hour)
	if h.auth(ci.ID, all[29]) == nil || h.auth(ci.ID, all[28]) == nil || h.auth(ci.ID, last) != nil {
		t.Error("after a rotation with grace 1h, an hour later, an older secret still works or the new one does not")
	}
	if got, _ := h.svc.Clients().Get(ctx, ci.ID); len(got.Secrets) != 1 || !got.PreviousSecretExpiresAt.IsZero() {
		t.Errorf("a lapsed previous secret is still shown: %+v", got)
	}
}

func TestUpdateClientRedirects(t *testing.T) {
	h := newHarness(t)
	ci, _ := h.createClient(t, "dev", appRedirect, otherRedir)
	if _, err := h.svc.Authorize(context.Background(), params("client_id", ci.ID, "redirect_uri", otherRedir), testBrowser); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Clients().Update(context.Background(), ci.ID, "intruder", ClientSpec{RedirectURIs: []string{otherRedir}}); !errors.Is(err, ErrClientNotFound) {
		t.Fatalf("another owner's update = %v", err)
	}
	got, err := h.svc.Clients().Update(context.Background(), ci.ID, "dev", ClientSpec{Name: ptr(" New "), RedirectURIs: []string{appRedirect}})
	if err != nil || got.Name != "New" || !slices.Equal(got.RedirectURIs, []string{appRedirect}) {
		t.Fatalf("UpdateClient = %+v, %v", got, err)
	}
	if _, err := h.svc.Authorize(context.Background(), params("client_id", ci.ID, "redirect_uri", otherRedir), testBrowser); err == nil {
		t.Error("the removed redirect URI is still accepted")
	}
}

func TestClientLimitsAndValidation(t *testing.T) {
	h := newHarness(t)
	h.svc.clients.maxPerOwner = 2
	h.createClient(t, "dev", appRedirect)
	h.createClient(t, "dev", appRedirect)
	if _, _, err := h.svc.Clients().Create(context.Background(), ClientSpec{Name: ptr("x"), RedirectURIs: []string{appRedirect}, Owner: "dev"}); !errors.Is(err, ErrTooManyClients) {
		t.Errorf("third client = %v, want ErrTooManyClients", err)
	}
	list, err := h.svc.Clients().List(context.Background(), "dev")
	if err != nil || len(list) != 2 {
		t.Errorf("ListClients(dev) = %d, %v", len(list), err)
	}
	all, _ := h.svc.Clients().List(context.Background(), "")
	if len(all) != 2+len(testClients) || !all[0].Static {
		t.Errorf("ListClients() = %d clients, first %+v", len(all), all[0])
	}
	for _, tc := range []struct {
		name string
		spec ClientSpec
	}{
		{"no name", ClientSpec{Name: ptr(" "), RedirectURIs: []string{appRedirect}}},
		{"long name", ClientSpec{Name: ptr(strings.Repeat("n", MaxClientNameLen+1)), RedirectURIs: []string{appRedirect}}},
		{"no redirect", ClientSpec{Name: ptr("a"), RedirectURIs: []string{}}},
		{"relative", ClientSpec{Name: ptr("a"), RedirectURIs: []string{"/cb"}}},
		{"fragment", ClientSpec{Name: ptr("a"), RedirectURIs: []string{"https://a.test/cb#x"}}},
		{"http", ClientSpec{Name: ptr("a"), RedirectURIs: []string{"http://a.test/cb"}}},
		{"javascript", ClientSpec{Name: ptr("a"), RedirectURIs: []string{"javascript:alert(1)"}}},
		{"too many", ClientSpec{Name: ptr("a"), RedirectURIs: slices.Repeat([]string{appRedirect}, MaxRedirectURIs+1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := h.svc.Clients().Create(context.Background(), tc.spec); !errors.Is(err, ErrClientInvalid) {
				t.Errorf("CreateClient = %v, want ErrClientInvalid", err)
			}
		})
	}
	for _, ok := range []string{"http://127.0.0.1:9/cb", "http://localhost/cb", "http://[::1]/cb", "https://a.test/cb?x=1"} {
		if err := ValidateRedirectURI(ok, false); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	if err := ValidateRedirectURI("http://a.test/cb", true); err != nil {
		t.Errorf("http in dev mode: %v", err)
	}
	if _, err := h.svc.Clients().Update(context.Background(), "app", "", ClientSpec{Name: ptr("x")}); !errors.Is(err, ErrClientStatic) {
		t.Errorf("updating a static client = %v", err)
	}
	if err := h.svc.Clients().Delete(context.Background(), "app", ""); !errors.Is(err, ErrClientStatic) {
		t.Errorf("deleting a static client = %v", err)
	}
}

// TestDynamicClientsAcrossInstances: two services on one store see each other's
// changes at once.
func TestDynamicClientsAcrossInstances(t *testing.T) {
	a := newHarness(t)
	b := newHarnessOn(t, a.store, testSecret)
	ci, secret := a.createClient(t, "", appRedirect)
	if err := b.auth(ci.ID, secret); err != nil {
		t.Fatalf("the other instance refuses the new client: %v", err)
	}
	_, fresh, err := b.svc.Clients().RotateSecret(context.Background(), ci.ID, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if a.auth(ci.ID, secret) == nil || a.auth(ci.ID, fresh) != nil {
		t.Error("the first instance did not see the rotation at once")
	}
}

// TestRedeemFirstParty: a first party's code is redeemed with the token
// endpoint's checks and transaction (PKCE, single use, the grant written, which
// a replay revokes), but issues no tokens (no TokenIssued event).
func TestRedeemFirstParty(t *testing.T) {
	h := newHarness(t)
	var rec eventtest.Recorder
	h.svc.events = rec.Sink()
	ctx := context.Background()
	l := h.login(t, params("code_challenge", pkceChallengeB, "code_challenge_method", "S256"), "alice")
	rec.Take()
	_, err := h.svc.RedeemFirstParty(ctx, "app", l.code, appRedirect, strings.Repeat("a", 43))
	wantOAuthError(t, err, ErrInvalidGrant)
	human, err := h.svc.RedeemFirstParty(ctx, "app", l.code, appRedirect, pkceVerifierB)
	if err != nil || human != l.humanID {
		t.Fatalf("RedeemFirstParty = %q, %v; want %q", human, err, l.humanID)
	}
	wantEvents(t, &rec, "redeemed")
	if _, err := h.svc.RedeemFirstParty(ctx, "app", l.code, appRedirect, pkceVerifierB); err == nil {
		t.Error("a code redeemed twice")
	}
	wantEvents(t, &rec, "redeemed twice", event.Event{Kind: event.CodeReused, Outcome: event.Revoked, ClientID: "app", HumanID: l.humanID})
}

// TestStillRegistered: the token transaction of a dynamic client, which
// authenticates it (caller.in), sees its deletion, whether the request presented a
// secret or the calling code vouched for the client.
func TestStillRegistered(t *testing.T) {
	h := newHarness(t)
	ci, secret := h.createClient(t, "", appRedirect)
	presented, err := h.svc.clients.caller(context.Background(), ci.ID, secret, authPost)
	if err != nil {
		t.Fatal(err)
	}
	trusted, err := h.svc.clients.trustedCaller(ci.ID)
	if err != nil {
		t.Fatal(err)
	}
	check := func(c *caller) error {
		return h.store.Update(context.Background(), func(txn storage.Txn) error { _, err := c.in(txn); return err })
	}
	for _, c := range []*caller{presented, trusted} {
		if err := check(c); err != nil {
			t.Fatalf("before the deletion: %v", err)
		}
	}
	if err := h.svc.Clients().Delete(context.Background(), ci.ID, ""); err != nil {
		t.Fatal(err)
	}
	wantError(t, check(presented), ErrInvalidClient)
	wantError(t, check(trusted), ErrInvalidClient)
}

// TestCheckRedirectURI: the one redirect URI check of static and dynamic clients
// refuses each loose form, for redirect_uri and post_logout_redirect_uri alike, and
// accepts the exact URIs clients use (issue 18, finding 6).
func TestCheckRedirectURI(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct{ name, uri string }{
		{"empty", ""},
		{"too long", "https://a.example/" + strings.Repeat("a", MaxRedirectURILen)},
		{"a space in the path", "https://evil.example/a b"},
		{"a space in the host", "https://evil .example/cb"},
		{"a tab", "https://evil.example/a\tb"},
		{"a newline", "https://evil.example/c\nb"},
		{"a NUL byte", "https://evil.example/cb\x00"},
		{"a bidi control", "https://evil.example/\u202ecb"},
		{"a zero-width space", "https://evil\u200b.example/cb"},
		{"a no-break space", "https://evil.example/a\u00a0b"},
		{"invalid UTF-8", "https://evil.example/\xff"},
		{"port too large", "https://evil.example:99999/cb"},
		{"port 0", "https://evil.example:0/cb"},
		{"empty port", "https://evil.example:/cb"},
		{"port with a sign", "https://evil.example:+443/cb"},
		{"wildcard host", "https://*.evil.example/cb"},
		{"wildcard path", "https://evil.example/*"},
		{"wildcard port", "https://evil.example:*/cb"},
		{"fragment", "https://a.example/cb#x"},
		{"empty fragment", "https://a.example/cb#"},
		{"user information", "https://a.example@evil.example/cb"},
		{"relative", "/cb"},
		{"no host", "https:///cb"},
		{"opaque", "https:evil.example/cb"},
		{"javascript", "javascript:alert(1)"},
		{"javascript with a host", "javascript://a.example/%0aalert(1)"},
		{"data", "data:text/html,x"},
		{"another scheme", "ftp://a.example/cb"},
		{"empty label", "https://evil..example/cb"},
		{"hyphen first", "https://-evil.example/cb"},
		{"unicode host", "https://évil.example/cb"},
		{"percent-encoded host", "https://evil%2eexample/cb"},
		{"IPv6 zone", "https://[fe80::1%25eth0]/cb"},
		{"http elsewhere", "http://a.example/cb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, option := range []string{"redirect_uri", "post_logout_redirect_uri"} {
				err := CheckRedirectURI(option, tc.uri, false)
				if !errors.Is(err, ErrClientInvalid) || !strings.HasPrefix(err.Error(), option) {
					t.Errorf("%s %q = %v, want ErrClientInvalid naming %s", option, tc.uri, err, option)
				}
			}
			if tc.name == "http elsewhere" {
				return // the one form allowHTTP admits
			}
			if err := CheckRedirectURI("redirect_uri", tc.uri, true); err == nil {
				t.Errorf("%q accepted with http allowed (dev mode, static clients)", tc.uri)
			}
			if err := CheckClients([]Client{{ID: "c", Secret: "s", RedirectURIs: []string{tc.uri}}}, false); err == nil || !strings.Contains(err.Error(), "client c: redirect_uri") {
				t.Errorf("static redirect_uri %q: CheckClients = %v, want a refusal naming redirect_uri", tc.uri, err)
			}
			if err := CheckClients([]Client{{ID: "c", Secret: "s", PostLogoutRedirectURIs: []string{tc.uri}}}, false); err == nil || !strings.Contains(err.Error(), "client c: post_logout_redirect_uri") {
				t.Errorf("static post_logout_redirect_uri %q: CheckClients = %v, want a refusal naming post_logout_redirect_uri", tc.uri, err)
			}
			if _, _, err := h.svc.Clients().Create(context.Background(), ClientSpec{Name: ptr("a"), RedirectURIs: []string{tc.uri}}); !errors.Is(err, ErrClientInvalid) {
				t.Errorf("dynamic client with %q: %v, want ErrClientInvalid", tc.uri, err)
			}
		})
	}
	for _, ok := range []string{
		"https://a.example/cb", "https://a.example:8443/cb?x=1&y=%20z", "https://a.example:65535/", "https://a/cb",
		"https://sub_domain.a.example/cb", "https://xn--vil-bma.example/cb", "https://192.0.2.1/cb", "https://[2001:db8::1]:443/cb",
		"https://a.example/a%20b", "http://127.0.0.1:9/cb", "http://localhost/cb", "http://app.localhost:3000/cb", "http://[::1]/cb",
	} {
		if err := CheckRedirectURI("redirect_uri", ok, false); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
		if err := CheckClients([]Client{{ID: "c", Secret: "s", RedirectURIs: []string{ok}, PostLogoutRedirectURIs: []string{ok}}}, false); err != nil {
			t.Errorf("static %s: %v", ok, err)
		}
	}
	// Static clients follow the same rule: plain http only on loopback, outside
	// dev mode (issue 18, finding 6); in dev mode on any host.
	for _, c := range []Client{
		{ID: "c", Secret: "s", RedirectURIs: []string{"http://a.example/cb"}},
		{ID: "c", Secret: "s", PostLogoutRedirectURIs: []string{"http://a.example/"}},
	} {
		if err := CheckClients([]Client{c}, false); err == nil || !strings.Contains(err.Error(), "must use https") {
			t.Errorf("static http URI on a public host: %v, want refused", err)
		}
		if err := CheckClients([]Client{c}, true); err != nil {
			t.Errorf("static http URI in dev mode: %v", err)
		}
	}
}
