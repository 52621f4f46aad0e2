package oidc

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/internal/clocktest"
	"github.com/palmgate/palmgate/internal/keystest"
	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/badgerstore"
	"github.com/palmgate/palmgate/storage/memstore"
)

const (
	testIssuer   = "https://id.example.test"
	testSecret   = "pairwise-secret-for-tests"
	appRedirect  = "https://app.example.test/cb"
	appLoopback  = "http://127.0.0.1:8080/callback"
	accessTTL    = time.Hour
	refreshTTL   = 2160 * time.Hour
	codeTTL      = 5 * time.Minute
	loginTTL     = 10 * time.Minute
	oauthIssuer  = testIssuer + "/oauth2"
	otherRedir   = "https://other.example.test/cb"
	sharedSector = "shared-sector"
	// Resources (RFC 8707) client app may ask tokens for.
	apiResource      = "https://api.example.test"
	otherAPIResource = "https://orders.example.test/v2"
)

// testBinding is the login cookie of the browser the tests log in with.
var (
	testBinding = strings.Repeat("b", 43)
	testBrowser = Browser{Binding: testBinding, IP: "192.0.2.10", Summary: "Firefox on Linux"}
)

var testClients = []Client{
	{ID: "app", Secret: "app-secret", RedirectURIs: []string{appRedirect, appLoopback}, Name: "Example App",
		Scopes: []string{"openid", "offline_access", "profile", "orders:read"}, Resources: []string{apiResource, otherAPIResource},
		PostLogoutRedirectURIs: []string{appLoggedOut}},
	{ID: "other", Secret: "other-secret", RedirectURIs: []string{otherRedir}, Sector: sharedSector},
	{ID: "third", Secret: "third-secret", RedirectURIs: []string{"https://third.example.test/cb"}, Sector: sharedSector},
	{ID: "es-app", Secret: "es-secret", RedirectURIs: []string{esRedirect}, IDTokenAlg: keys.ES256,
		PostLogoutRedirectURIs: []string{appLoggedOut}},
	{ID: "ed-app", Secret: "ed-secret", RedirectURIs: []string{edRedirect}, IDTokenAlg: keys.EdDSA,
		PostLogoutRedirectURIs: []string{appLoggedOut}},
	// A public client (public_test.go): no secret, PKCE required, CORS origins.
	{ID: "spa", Public: true, RedirectURIs: []string{spaRedirect}, AllowedOrigins: []string{spaExtraOrigin}},
}

// Redirect URIs of the clients that pick their ID token algorithm.
const (
	esRedirect = "https://es.example.test/cb"
	edRedirect = "https://ed.example.test/cb"
)

// fakeClock is the injected clock: tests move it, nothing sleeps.
type fakeClock = clocktest.Clock

// harness is a Service on a real Badger store, with a palm service in dev mode.
type harness struct {
	clock *fakeClock
	store storage.Store
	palm  *palm.Service
	keys  *keys.Set
	svc   *Service
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	store := memstore.New() // core's rules, not Badger's, are under test
	return newHarnessOn(t, store, testSecret)
}

func newHarnessOn(t *testing.T, store storage.Store, secret string, keyOpts ...keys.Option) *harness {
	t.Helper()
	// Real time (the store's TTLs use it), to the second as JWT times are.
	h := &harness{clock: clocktest.New(time.Now().Truncate(time.Second)), store: store}
	ctx := context.Background()
	var err error
	if h.palm, err = palm.NewService(palm.Config{Store: store, Now: h.clock.Now, Issuer: testIssuer, Dev: true}); err != nil {
		t.Fatalf("palm.NewService: %v", err)
	}
	if h.keys, err = keys.Open(ctx, store, h.clock.Now, append([]keys.Option{keys.WithGenerator(keystest.Generator)}, keyOpts...)...); err != nil {
		t.Fatalf("keys.Open: %v", err)
	}
	h.svc, err = NewService(ctx, Config{
		Store: store, Palm: h.palm, Keys: h.keys, Now: h.clock.Now, Issuer: testIssuer,
		Clients: testClients, PairwiseSecret: secret,
		AccessTTL: accessTTL, RefreshTTL: refreshTTL, CodeTTL: codeTTL, LoginTTL: loginTTL,
	})
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	return h
}

// params are the query of a valid authorization request of client app, changed by
// the given key/value pairs (an empty value removes the parameter).
func params(kv ...string) url.Values {
	v := url.Values{
		"response_type": {"code"}, "client_id": {"app"}, "redirect_uri": {appRedirect},
		"scope": {"openid"}, "state": {"st-123"}, "nonce": {"n-456"},
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			v.Del(kv[i])
		} else {
			v.Set(kv[i], kv[i+1])
		}
	}
	return v
}

func (h *harness) authorize(t *testing.T, p url.Values) *AuthRequest {
	t.Helper()
	ar, err := h.svc.Authorize(context.Background(), p, testBrowser)
	if err != nil {
		t.Fatalf("Authorize(%v): %v", p, err)
	}
	return ar
}

// scan completes the palm challenge of ar as palm subject who, returning the human.
func (h *harness) scan(t *testing.T, ar *AuthRequest, who string) string {
	t.Helper()
	st, err := h.svc.Login(context.Background(), ar.ID, testBinding, true)
	if err != nil {
		t.Fatalf("Login: %v", err)
	}
	c, err := h.palm.DevScan(context.Background(), ar.ChallengeID, st.Challenge.Nonce, who)
	if err != nil {
		t.Fatalf("DevScan: %v", err)
	}
	return c.HumanID
}

// login is a logged-in authorization: its code, the human and the request.
type login struct {
	code    string
	humanID string
	ar      *AuthRequest
}

// login runs Authorize, the palm scan of who and Finish.
func (h *harness) login(t *testing.T, p url.Values, who string) login {
	t.Helper()
	ar := h.authorize(t, p)
	humanID := h.scan(t, ar, who)
	r, err := h.svc.Finish(context.Background(), ar.ID, testBinding)
	if err != nil || r == nil || r.Code == "" {
		t.Fatalf("Finish = %+v, %v; want a code", r, err)
	}
	return login{code: r.Code, humanID: humanID, ar: ar}
}

func (h *harness) exchange(t *testing.T, l login, verifier string) *TokenResponse {
	t.Helper()
	resp, err := h.svc.ExchangeCode(context.Background(), l.ar.ClientID, l.code, l.ar.RedirectURI, verifier)
	if err != nil {
		t.Fatalf("ExchangeCode: %v", err)
	}
	return resp
}

// parseToken verifies token with the key set, pinning alg, and returns its header.
func (h *harness) parseToken(t *testing.T, token, alg string, claims jwt.Claims) map[string]any {
	t.Helper()
	tok, err := jwt.NewParser(jwt.WithValidMethods([]string{alg}), jwt.WithTimeFunc(h.clock.Now), jwt.WithIssuer(oauthIssuer)).
		ParseWithClaims(token, claims, func(tok *jwt.Token) (any, error) {
			kid, _ := tok.Header["kid"].(string)
			k := h.keys.ByID(kid)
			if k == nil {
				return nil, errors.New("unknown kid")
			}
			return k.Public(), nil
		})
	if err != nil {
		t.Fatalf("parsing %s token: %v", alg, err)
	}
	return tok.Header
}

// oauthErr is what a test reads of an OAuth refusal: its code and description
// (the fault's code and message), and where it goes back (a RedirectError's
// redirect_uri, state and response mode; empty when it does not).
type oauthErr struct {
	Code, Description                string
	RedirectURI, State, ResponseMode string
}

// asOAuthErr returns err as an OAuth refusal: a fault whose code is of the OAuth
// dialect (what the edge answers as it is; anything else is a 500 there).
func asOAuthErr(err error) (*oauthErr, bool) {
	var f *fault.Error
	if !errors.As(err, &f) || !IsOAuthCode(f.Code) {
		return nil, false
	}
	oe := &oauthErr{Code: f.Code, Description: f.Message}
	var re *RedirectError
	if errors.As(err, &re) {
		oe.RedirectURI, oe.State, oe.ResponseMode = re.RedirectURI, re.State, re.ResponseMode
	}
	return oe, true
}

// wantError fails unless err is an OAuth refusal with code.
func wantError(t *testing.T, err error, code string) *oauthErr {
	t.Helper()
	oe, ok := asOAuthErr(err)
	if !ok {
		t.Fatalf("error = %v (%T), want an OAuth fault %s", err, err, code)
	}
	if oe.Code != code {
		t.Fatalf("error code = %s (%s), want %s", oe.Code, oe.Description, code)
	}
	return oe
}

// count returns how many records live under prefix.
func (h *harness) count(t *testing.T, prefix string) int {
	t.Helper()
	n := 0
	err := h.store.View(context.Background(), func(txn storage.Txn) error {
		return txn.Iterate([]byte(prefix), func(_, _ []byte) (bool, error) { n++; return true, nil })
	})
	if err != nil {
		t.Fatalf("counting %s: %v", prefix, err)
	}
	return n
}

func handPairwise(secret, sector, humanID string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(bytes.Join([][]byte{[]byte(sector), []byte(humanID)}, []byte{0}))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func TestPairwiseSubject(t *testing.T) {
	const human = "7d444840-9dc0-11d1-b245-5ffdce74fad2"
	const other = "0b7e1f5c-4b8a-4f07-9c55-2f6a1c1f1a10"
	tests := []struct {
		name                  string
		secret, sector, human string
	}{
		{"client sector", "s3cret", "app", human},
		{"custom sector", "s3cret", "shared-sector", human},
		{"other human", "s3cret", "app", other},
		{"other secret", "another secret", "app", human},
		{"empty sector", "s3cret", "", human},
		{"unicode sector", "s3cret", "sécteur", human},
	}
	seen := map[string]string{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := PairwiseSubject([]byte(tc.secret), tc.sector, tc.human)
			if want := handPairwise(tc.secret, tc.sector, tc.human); got != want {
				t.Errorf("PairwiseSubject = %q, want %q", got, want)
			}
			if again := PairwiseSubject([]byte(tc.secret), tc.sector, tc.human); again != got {
				t.Errorf("not stable: %q then %q", got, again)
			}
			if len(got) != 43 || strings.ContainsAny(got, "+/=") {
				t.Errorf("%q is not base64url without padding of 32 bytes", got)
			}
			if prev, dup := seen[got]; dup {
				t.Errorf("same subject as case %q", prev)
			}
			seen[got] = tc.name
		})
	}
	t.Run("separator", func(t *testing.T) {
		// The 0x00 separator keeps sector "ab"+human "c" apart from "a"+"bc".
		if PairwiseSubject([]byte("k"), "ab", "c") == PairwiseSubject([]byte("k"), "a", "bc") {
			t.Error("sector and humanId are not separated")
		}
	})
	t.Run("known vector", func(t *testing.T) {
		// HMAC-SHA256("key", "sector\x00human"), computed independently.
		m := hmac.New(sha256.New, []byte("key"))
		m.Write([]byte("sector\x00human"))
		want := base64.RawURLEncoding.EncodeToString(m.Sum(nil))
		if got := PairwiseSubject([]byte("key"), "sector", "human"); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})
}

func TestPairwiseSecretGenerated(t *testing.T) {
	dir := t.TempDir()
	store, err := badgerstore.Open(dir, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	first := newHarnessOn(t, store, "")
	secret := first.svc.pairwiseSecret
	if len(secret) < 32 {
		t.Fatalf("generated secret is %d bytes, want 32 or more", len(secret))
	}
	var stored []byte
	if err := store.View(context.Background(), func(txn storage.Txn) error {
		stored, err = txn.Get(pairwiseSecretKey())
		return err
	}); err != nil || !bytes.Equal(stored, secret) {
		t.Fatalf("stored secret %x (%v), want the service's %x", stored, err, secret)
	}

	same := newHarnessOn(t, store, "")
	configured := newHarnessOn(t, store, "configured")
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	reopenedStore, err := badgerstore.Open(dir, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reopenedStore.Close() })
	reopened := newHarnessOn(t, reopenedStore, "")

	tests := []struct {
		name string
		h    *harness
		want []byte
	}{
		{"second NewService on the same store", same, secret},
		{"after reopening the store", reopened, secret},
		{"configured secret wins", configured, []byte("configured")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Equal(tc.h.svc.pairwiseSecret, tc.want) {
				t.Errorf("secret = %x, want %x", tc.h.svc.pairwiseSecret, tc.want)
			}
		})
	}
	// The configured secret did not replace the stored one.
	if err := reopenedStore.View(context.Background(), func(txn storage.Txn) error {
		stored, err = txn.Get(pairwiseSecretKey())
		return err
	}); err != nil || !bytes.Equal(stored, secret) {
		t.Errorf("stored secret after all starts = %x (%v), want %x", stored, err, secret)
	}

	// Logins after the restart give the same subject.
	l := reopened.login(t, params(), "alice")
	resp := reopened.exchange(t, l, "")
	var c AccessClaims
	reopened.parseToken(t, resp.AccessToken, keys.ES256, &c)
	if want := handPairwise(string(secret), "app", l.humanID); c.Subject != want {
		t.Errorf("sub = %q, want %q", c.Subject, want)
	}
}

func TestAuthenticateClient(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name, id, secret string
		ok               bool
	}{
		{"right secret", "app", "app-secret", true},
		{"right secret of another client", "other", "other-secret", true},
		{"wrong secret", "app", "app-secret-x", false},
		{"secret of another client", "app", "other-secret", false},
		{"empty secret", "app", "", false},
		{"secret prefix", "app", "app-secre", false},
		{"unknown client", "nobody", "app-secret", false},
		{"client id in other case", "APP", "app-secret", false},
		{"empty id", "", "app-secret", false},
		{"empty id and secret", "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := h.auth(tc.id, tc.secret)
			if tc.ok {
				if err != nil {
					t.Errorf("Authenticate: %v", err)
				}
				return
			}
			wantError(t, err, ErrInvalidClient)
		})
	}
}
