package oidc

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/storage"
)

const (
	regLoopback = "http://localhost:8090/callback"
	regAddress  = "198.51.100.7"
)

// openRegistration turns RFC 7591 registration on in h with cfg (Open set).
func (h *harness) openRegistration(cfg RegistrationConfig) {
	cfg.Open = true
	h.svc.clients.reg = cfg
}

func (h *harness) register(t *testing.T, req RegistrationRequest, address string) *Registered {
	t.Helper()
	out, err := h.svc.Register(context.Background(), req, address)
	if err != nil {
		t.Fatalf("Register(%+v): %v", req, err)
	}
	return out
}

// regParams is an authorization request of a registered client with PKCE.
func regParams(clientID, redirect string) url.Values {
	return params("client_id", clientID, "redirect_uri", redirect, "code_challenge", spaChallenge(), "code_challenge_method", "S256")
}

// TestRegisterPublicAndLogin: a public client registers loopback URIs with any
// port (localhost, 127.0.0.1, [::1]) and https, logs in with PKCE (the consent
// screen says it registered itself), exchanges its code with its client_id only,
// and the use keeps it for the refresh token lifetime.
func TestRegisterPublicAndLogin(t *testing.T) {
	h := newHarness(t)
	h.openRegistration(RegistrationConfig{})
	uris := []string{regLoopback, "http://127.0.0.1:53121/cb", "http://[::1]:4444/cb", "https://app.example.test/mcp/cb"}
	out := h.register(t, RegistrationRequest{RedirectURIs: uris, ClientName: "MCP Inspector",
		TokenEndpointAuthMethod: "none", GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"}}, regAddress)
	if out.ClientSecret != "" || out.ClientSecretExpiresAt != nil || out.TokenEndpointAuthMethod != "none" {
		t.Fatalf("public registration = %+v; want no secret and method none", out)
	}
	if strings.Join(out.RedirectURIs, " ") != strings.Join(uris, " ") || out.ClientName != "MCP Inspector" ||
		strings.Join(out.GrantTypes, " ") != "authorization_code refresh_token" || out.ClientIDIssuedAt != h.clock.Now().Unix() {
		t.Fatalf("registration echo = %+v", out)
	}
	if ci, err := h.svc.Clients().Get(context.Background(), out.ClientID); err != nil || !ci.SelfRegistered || ci.ExpiresAt.IsZero() {
		t.Fatalf("the admin view = %+v, %v; want self_registered and expires_at", ci, err)
	}
	rec := h.rawRecord(t, out.ClientID)
	if !rec.SelfRegistered || rec.Network != "198.51.100.0/24" || !rec.ExpiresAt.Equal(h.clock.Now().Add(DefaultRegistrationUnused)) {
		t.Fatalf("record = %+v; want self-registered from 198.51.100.0/24, lapsing in 24h", rec)
	}
	for _, redirect := range uris {
		ar := h.authorize(t, regParams(out.ClientID, redirect))
		st, err := h.svc.Login(context.Background(), ar.ID, testBinding, false)
		if err != nil {
			t.Fatal(err)
		}
		if req := st.Challenge.Request; !req.SelfRegistered || req.ClientNotice != RegisteredNotice || req.ClientName != "MCP Inspector" {
			t.Fatalf("palm request = %+v; want the self-registered notice", req)
		}
	}
	h.clock.Advance(time.Hour)
	l := h.login(t, regParams(out.ClientID, regLoopback), "alice")
	resp, err := h.token("grant_type", "authorization_code", "client_id", out.ClientID, "code", l.code,
		"redirect_uri", regLoopback, "code_verifier", spaVerifier)
	if err != nil || resp.AccessToken == "" {
		t.Fatalf("code exchange of the registered public client = %+v, %v", resp, err)
	}
	if rec := h.rawRecord(t, out.ClientID); !rec.ExpiresAt.Equal(h.clock.Now().Add(refreshTTL)) {
		t.Fatalf("after a use the client lapses at %v; want %v (refresh_token_ttl from its use)", rec.ExpiresAt, h.clock.Now().Add(refreshTTL))
	}
}

// TestRegisterConfidential: client_secret_post (the TS SDK's example) and the
// RFC's default client_secret_basic get a secret, which the token endpoint
// takes. Its client_secret_expires_at is when the registration lapses unless
// used (fourth review: it said 0, "never", of a secret that stops working with
// its unused registration after a day).
func TestRegisterConfidential(t *testing.T) {
	h := newHarness(t)
	h.openRegistration(RegistrationConfig{})
	for _, method := range []string{"client_secret_post", ""} {
		out := h.register(t, RegistrationRequest{RedirectURIs: []string{regLoopback}, TokenEndpointAuthMethod: method}, regAddress)
		want := orDefault(method, "client_secret_basic")
		lapse := h.clock.Now().Add(DefaultRegistrationUnused).Unix()
		if out.ClientSecret == "" || out.ClientSecretExpiresAt == nil || *out.ClientSecretExpiresAt != lapse || out.TokenEndpointAuthMethod != want {
			t.Fatalf("%q registration = %+v (client_secret_expires_at %d); want a secret, expiring at %d (the registration's lapse), method %s",
				method, out, deref(out.ClientSecretExpiresAt), lapse, want)
		}
		if rec := h.rawRecord(t, out.ClientID); rec.ExpiresAt.Unix() != lapse {
			t.Fatalf("the record lapses at %v; want %d, as answered", rec.ExpiresAt, lapse)
		}
		if out.ClientName != "localhost" {
			t.Fatalf("client_name = %q; want the redirect URI's host when none is given", out.ClientName)
		}
		l := h.login(t, regParams(out.ClientID, regLoopback), "alice")
		if _, err := h.token("grant_type", "authorization_code", "client_id", out.ClientID, "code", l.code,
			"redirect_uri", regLoopback, "code_verifier", spaVerifier); err == nil {
			t.Fatal("a confidential client without its secret got tokens")
		}
		l = h.login(t, regParams(out.ClientID, regLoopback), "alice")
		form := url.Values{"grant_type": {"authorization_code"}, "code": {l.code}, "redirect_uri": {regLoopback}, "code_verifier": {spaVerifier}}
		creq := ClientRequest{Params: form, Basic: &BasicCredentials{ID: out.ClientID, Secret: url.QueryEscape(out.ClientSecret)}}
		if want == "client_secret_post" { // the registered method only (TestRegisteredAuthMethodEnforced)
			form.Set("client_id", out.ClientID)
			form.Set("client_secret", out.ClientSecret)
			creq.Basic = nil
		}
		if _, err := h.svc.Token(context.Background(), creq); err != nil {
			t.Fatalf("code exchange with the registered secret: %v", err)
		}
	}
}

// TestRegisterRefusals: what RFC 7591 registration refuses, with its error codes.
func TestRegisterRefusals(t *testing.T) {
	h := newHarness(t)
	ok := []string{regLoopback}
	for _, tc := range []struct {
		name string
		req  RegistrationRequest
		code string
	}{
		{"no redirect URI", RegistrationRequest{}, ErrInvalidRedirectURI},
		{"http on a public host", RegistrationRequest{RedirectURIs: []string{"http://evil.example/cb"}}, ErrInvalidRedirectURI},
		{"a custom scheme", RegistrationRequest{RedirectURIs: []string{"javascript:alert(1)"}}, ErrInvalidRedirectURI},
		{"a fragment", RegistrationRequest{RedirectURIs: []string{"https://app.example.test/cb#x"}}, ErrInvalidRedirectURI},
		{"a wildcard", RegistrationRequest{RedirectURIs: []string{"https://*.example.test/cb"}}, ErrInvalidRedirectURI},
		{"user information", RegistrationRequest{RedirectURIs: []string{"https://a@app.example.test/cb"}}, ErrInvalidRedirectURI},
		{"too many URIs", RegistrationRequest{RedirectURIs: strings.Split(strings.Repeat(regLoopback+" ", MaxRedirectURIs+1), " ")[:MaxRedirectURIs+1]}, ErrInvalidRedirectURI},
		{"a bidi override in the name", RegistrationRequest{RedirectURIs: ok, ClientName: "Good \u202eppA liveE"}, ErrInvalidClientMetadata},
		{"a control character in the name", RegistrationRequest{RedirectURIs: ok, ClientName: "Good\x07App"}, ErrInvalidClientMetadata},
		{"a newline in the name", RegistrationRequest{RedirectURIs: ok, ClientName: "Good\nApp"}, ErrInvalidClientMetadata},
		{"a name too long", RegistrationRequest{RedirectURIs: ok, ClientName: strings.Repeat("a", MaxClientNameLen+1)}, ErrInvalidClientMetadata},
		{"private_key_jwt", RegistrationRequest{RedirectURIs: ok, TokenEndpointAuthMethod: "private_key_jwt"}, ErrInvalidClientMetadata},
		{"client_credentials", RegistrationRequest{RedirectURIs: ok, GrantTypes: []string{"client_credentials"}}, ErrInvalidClientMetadata},
		{"refresh_token alone", RegistrationRequest{RedirectURIs: ok, GrantTypes: []string{"refresh_token"}}, ErrInvalidClientMetadata},
		{"the implicit flow", RegistrationRequest{RedirectURIs: ok, ResponseTypes: []string{"token"}}, ErrInvalidClientMetadata},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.openRegistration(RegistrationConfig{})
			for _, dev := range []bool{false, true} { // dev mode allows no more
				h.svc.clients.devRedirects = dev
				_, err := h.svc.Register(context.Background(), tc.req, regAddress)
				f, isFault := fault.As(err)
				if !isFault || f.Code != tc.code || f.Class != fault.Invalid {
					t.Fatalf("Register (dev %v) = %v; want %s", dev, err, tc.code)
				}
			}
		})
	}
	t.Run("off", func(t *testing.T) {
		h.svc.clients.reg = RegistrationConfig{}
		if _, err := h.svc.Register(context.Background(), RegistrationRequest{RedirectURIs: ok}, regAddress); !errors.Is(err, ErrRegistrationOff) {
			t.Fatalf("Register while off = %v; want ErrRegistrationOff", err)
		}
	})
	if n := h.count(t, "oidc/client/"); n != 0 {
		t.Fatalf("%d clients stored by refused registrations", n)
	}
}

// TestRegisterCaps: a network past its cap gets 429 while another gets in; past
// the global cap every network gets 503; lapsed registrations count no more.
func TestRegisterCaps(t *testing.T) {
	h := newHarness(t)
	h.openRegistration(RegistrationConfig{MaxClients: 4, MaxPerNetwork: 2})
	req := RegistrationRequest{RedirectURIs: []string{regLoopback}, TokenEndpointAuthMethod: "none"}
	h.register(t, req, "198.51.100.7")
	h.register(t, req, "198.51.100.8")
	_, err := h.svc.Register(context.Background(), req, "198.51.100.9")
	if f, ok := fault.As(err); !ok || f.Class != fault.TooMany || f.Code != TemporarilyUnavailable || f.RetryAfter <= 0 {
		t.Fatalf("third registration from one /24 = %v; want TooMany with a Retry-After", err)
	}
	h.register(t, req, "203.0.113.5")
	h.register(t, req, "") // an address the edge does not count is not capped per network
	_, err = h.svc.Register(context.Background(), req, "192.0.2.1")
	if f, ok := fault.As(err); !ok || f.Class != fault.Unavailable {
		t.Fatalf("registration past the global cap = %v; want Unavailable", err)
	}
	h.clock.Advance(DefaultRegistrationUnused + time.Second)
	h.register(t, req, "198.51.100.9") // the lapsed ones count no more
}

// TestRegistrationLapses: a registration never used is unknown once Unused has
// passed (and the store collects it); one used lives on.
func TestRegistrationLapses(t *testing.T) {
	h := newHarness(t)
	h.openRegistration(RegistrationConfig{Unused: time.Hour})
	req := RegistrationRequest{RedirectURIs: []string{regLoopback}, TokenEndpointAuthMethod: "none"}
	unused := h.register(t, req, regAddress)
	req.GrantTypes = []string{"authorization_code", "refresh_token"}
	used := h.register(t, req, regAddress)
	p := regParams(used.ClientID, regLoopback)
	p.Set("scope", "openid offline_access")
	l := h.login(t, p, "alice")
	resp, err := h.token("grant_type", "authorization_code", "client_id", used.ClientID, "code", l.code,
		"redirect_uri", regLoopback, "code_verifier", spaVerifier)
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Hour + time.Second)
	_, err = h.svc.Authorize(context.Background(), regParams(unused.ClientID, regLoopback), testBrowser)
	wantError(t, err, ErrInvalidRequest)
	h.authorize(t, regParams(used.ClientID, regLoopback))
	// A client whose registration lapsed gets no more tokens, before the store
	// collects its record.
	if resp.RefreshToken == "" {
		t.Fatal("no refresh token to test with")
	}
	err = h.store.Update(context.Background(), func(txn storage.Txn) error {
		rec, err := readClient(txn, used.ClientID)
		if err != nil {
			return err
		}
		rec.ExpiresAt = h.clock.Now()
		return h.svc.clients.writeClient(txn, rec, 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.token("grant_type", "refresh_token", "client_id", used.ClientID, "refresh_token", resp.RefreshToken)
	wantError(t, err, ErrInvalidClient)
	if ttl := h.svc.clients.recordTTL(h.rawRecord(t, unused.ClientID).ExpiresAt); ttl != time.Hour {
		t.Fatalf("store TTL of a lapsed record = %v; want the hour of margin", ttl)
	}
}

func deref(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}

// rawRecord reads a dynamic client's stored record.
func (h *harness) rawRecord(t *testing.T, id string) *clientRecord {
	t.Helper()
	rec, err := h.svc.clients.getRecord(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestLoopbackAnyPort: a self-registered client's loopback IP redirect URI
// matches with any port (RFC 8252 7.3), and the token endpoint wants the URI the
// request used; nothing else about the URI may differ, localhost keeps its port,
// and the operator's clients keep the exact match.
func TestLoopbackAnyPort(t *testing.T) {
	h := newHarness(t)
	h.openRegistration(RegistrationConfig{})
	out := h.register(t, RegistrationRequest{RedirectURIs: []string{"http://127.0.0.1:1234/cb?x=1", "http://[::1]/cb", regLoopback},
		TokenEndpointAuthMethod: "none"}, regAddress)
	for _, uri := range []string{"http://127.0.0.1:50123/cb?x=1", "http://[::1]:8080/cb", "http://127.0.0.1:1234/cb?x=1"} {
		h.authorize(t, regParams(out.ClientID, uri))
	}
	l := h.login(t, regParams(out.ClientID, "http://127.0.0.1:50123/cb?x=1"), "alice")
	_, err := h.token("grant_type", "authorization_code", "client_id", out.ClientID, "code", l.code,
		"redirect_uri", "http://127.0.0.1:1234/cb?x=1", "code_verifier", spaVerifier)
	wantError(t, err, ErrInvalidGrant)
	l = h.login(t, regParams(out.ClientID, "http://127.0.0.1:50123/cb?x=1"), "alice")
	if _, err := h.token("grant_type", "authorization_code", "client_id", out.ClientID, "code", l.code,
		"redirect_uri", "http://127.0.0.1:50123/cb?x=1", "code_verifier", spaVerifier); err != nil {
		t.Fatalf("exchange with the port the request used: %v", err)
	}
	for _, uri := range []string{
		"http://127.0.0.1:50123/cb",        // the query differs
		"http://127.0.0.1:50123/cb?x=2",    // the query differs
		"http://127.0.0.1:50123/other?x=1", // the path differs
		"https://127.0.0.1:50123/cb?x=1",   // the scheme differs
		"http://127.0.0.2:50123/cb?x=1",    // another loopback address
		"http://localhost:9999/callback",   // localhost keeps its port
		"http://[::1]:8080/cb#f",           // a fragment
		"http://u@127.0.0.1:50123/cb?x=1",  // user information
		"http://127.0.0.1:0/cb?x=1",        // port 0
		"http://evil.example:1234/cb?x=1",  // not loopback
	} {
		_, err := h.svc.Authorize(context.Background(), regParams(out.ClientID, uri), testBrowser)
		if oe := wantError(t, err, ErrInvalidRequest); oe.RedirectURI != "" {
			t.Errorf("%s: sent back to the client", uri)
		}
	}
	// The operator's client with a loopback URI keeps the exact match.
	_, err = h.svc.Authorize(context.Background(), params("redirect_uri", "http://127.0.0.1:9090/callback"), testBrowser)
	wantError(t, err, ErrInvalidRequest)
	h.authorize(t, params("redirect_uri", appLoopback))
}
