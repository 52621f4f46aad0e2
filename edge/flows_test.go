package edge_test

// The flows the tests drive through the routes, as a browser, a palm app and an
// agent would: a login up to its code and tokens, palm assertions, agent
// registrations.

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/core/agent"
	"github.com/palmgate/palmgate/core/palm"
)

// pkceChallenge is the S256 code_challenge of testPKCEVerifer.
func pkceChallenge() string {
	sum := sha256.Sum256([]byte(testPKCEVerifer))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// authorizeQuery is a valid authorization request of the test client, with PKCE.
func authorizeQuery() url.Values {
	return url.Values{
		"response_type": {"code"}, "client_id": {testClientID}, "redirect_uri": {testRedirect},
		"scope": {"openid offline_access"}, "state": {"st-123"}, "nonce": {"n-456"},
		"code_challenge": {pkceChallenge()}, "code_challenge_method": {"S256"},
	}
}

// login is a login in progress: its request id and the browser's cookie.
type login struct {
	id     string
	cookie *http.Cookie
}

// authorize starts a login and checks the 302 to the verify page.
func (e *testEnv) authorize(t *testing.T, q url.Values) login {
	t.Helper()
	w := e.get(t, "/oauth2/authorize?"+q.Encode())
	wantStatus(t, w, http.StatusFound)
	loc, err := url.Parse(w.Header().Get("Location"))
	if err != nil || loc.Scheme+"://"+loc.Host+loc.Path != testIssuer+"/oauth2/verify" {
		t.Fatalf("Location = %q, want the verify page", w.Header().Get("Location"))
	}
	l := login{id: loc.Query().Get("auth_request_id")}
	if l.id == "" {
		t.Fatalf("Location %q has no auth_request_id", loc)
	}
	cookies := w.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("authorize set %d cookies, want the login cookie", len(cookies))
	}
	l.cookie = cookies[0]
	return l
}

// challenge is the login's palm challenge as the verify page's JSON shows it to
// the browser that started it.
func (e *testEnv) challenge(t *testing.T, l login) (id, nonce string) {
	t.Helper()
	w := e.getJSON(t, "/oauth2/verify?auth_request_id="+l.id, l.cookie)
	wantStatus(t, w, http.StatusOK)
	m := decode(t, w)
	id, _ = m["challengeId"].(string)
	nonce, _ = m["nonce"].(string)
	if id == "" || nonce == "" {
		t.Fatalf("the verify JSON lacks challengeId or nonce: %s", w.Body)
	}
	return id, nonce
}

// devScan completes a palm challenge as person palmSubject (dev mode).
func (e *testEnv) devScan(t *testing.T, challengeID, nonce, palmSubject string) {
	t.Helper()
	w := e.postJSON(t, "/v1/palm/challenges/"+challengeID+"/dev-scan", map[string]string{"nonce": nonce, "palmSubject": palmSubject})
	wantStatus(t, w, http.StatusOK)
	if m := decode(t, w); m["status"] != "verified" {
		t.Fatalf("dev-scan status = %v, want verified", m["status"])
	}
}

// scanned runs a login of authorization request q to its palm scan as
// palmSubject and returns the login page's answer to its browser then: the 302
// to the client, or the consent page within an SSO session.
func (e *testEnv) scanned(t *testing.T, q url.Values, palmSubject string) *httptest.ResponseRecorder {
	t.Helper()
	l := e.authorize(t, q)
	id, nonce := e.challenge(t, l)
	e.devScan(t, id, nonce, palmSubject)
	return e.do(t, req{method: http.MethodGet, target: "/oauth2/verify?auth_request_id=" + url.QueryEscape(l.id), cookies: []*http.Cookie{l.cookie}})
}

// code runs a whole login as palmSubject and returns the authorization code.
func (e *testEnv) code(t *testing.T, palmSubject string) string {
	t.Helper()
	w := e.scanned(t, authorizeQuery(), palmSubject)
	wantStatus(t, w, http.StatusFound)
	loc, err := url.Parse(w.Header().Get("Location"))
	if err != nil || !strings.HasPrefix(loc.String(), testRedirect+"?") {
		t.Fatalf("Location = %q, want the redirect_uri", w.Header().Get("Location"))
	}
	if loc.Query().Get("state") != "st-123" || loc.Query().Get("code") == "" {
		t.Fatalf("Location %q lacks the code or the state", loc)
	}
	return loc.Query().Get("code")
}

// tokens exchanges a fresh login's code (client_secret_post) and returns the
// token answer.
func (e *testEnv) tokens(t *testing.T, palmSubject string) map[string]any {
	t.Helper()
	w := e.postForm(t, "/oauth2/token", codeForm(e.code(t, palmSubject)), nil)
	wantStatus(t, w, http.StatusOK)
	return decode(t, w)
}

// codeForm is the token request exchanging code, authenticated by client_secret_post.
func codeForm(code string) url.Values {
	return url.Values{
		"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {testRedirect},
		"code_verifier": {testPKCEVerifer}, "client_id": {testClientID}, "client_secret": {testSecret},
	}
}

// assertion is a palm assertion of the test attestor for a challenge.
func assertion(t *testing.T, challengeID, nonce, palmSubject string, now time.Time) string {
	t.Helper()
	claims := palm.Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: testAttestor, Audience: jwt.ClaimStrings{testIssuer}, Subject: palmSubject,
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(2 * time.Minute)),
		},
		Challenge: challengeID, Nonce: nonce,
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims).SignedString(testAttestorKey)
	if err != nil {
		t.Fatalf("signing the assertion: %v", err)
	}
	return s
}

// testAgent is an agent with a key pair derived from its name.
type testAgent struct {
	deviceID string
	priv     ed25519.PrivateKey
}

func newAgent(deviceID string) *testAgent {
	seed := sha256.Sum256([]byte("edge test agent " + deviceID))
	return &testAgent{deviceID: deviceID, priv: ed25519.NewKeyFromSeed(seed[:])}
}

func (a *testAgent) publicKey() string {
	return agent.EncodePublicKey(a.priv.Public().(ed25519.PublicKey))
}

// signed is the five-field agent challenge of message at timestamp ts.
func (a *testAgent) signed(message string, ts int64) map[string]any {
	return map[string]any{
		"deviceId": a.deviceID, "publicKey": a.publicKey(), "message": message,
		"signature": base64.StdEncoding.EncodeToString(ed25519.Sign(a.priv, []byte(message))),
		"timestamp": ts,
	}
}

// registration is the agent's registration challenge at time now.
func (a *testAgent) registration(now time.Time) map[string]any {
	ts := now.UnixMilli()
	return a.signed("agent-register-"+strconv.FormatInt(ts, 10), ts)
}

// register registers the agent under person palmSubject through the routes:
// init, the owner page's JSON, a dev scan. It returns the session id.
func (e *testEnv) register(t *testing.T, a *testAgent, palmSubject string) string {
	t.Helper()
	w := e.postJSON(t, "/v1/agent/register/init", a.registration(e.clock.Now()))
	wantStatus(t, w, http.StatusCreated)
	m := decode(t, w)
	sessionID, _ := m["sessionId"].(string)
	if sessionID == "" {
		t.Fatalf("init answered no sessionId: %s", w.Body)
	}
	if want := testIssuer + "/v1/agent/register/" + sessionID + "/verify"; m["registrationUrl"] != want {
		t.Errorf("registrationUrl = %v, want %s", m["registrationUrl"], want)
	}
	challengeID, nonce := e.registrationChallenge(t, sessionID)
	e.devScan(t, challengeID, nonce, palmSubject)
	return sessionID
}

// registrationChallenge reads the palm challenge of a registration session from
// the owner's page as a phone sees it: the link to the scan URL.
func (e *testEnv) registrationChallenge(t *testing.T, sessionID string) (id, nonce string) {
	t.Helper()
	w := e.do(t, req{method: http.MethodGet, target: "/v1/agent/register/" + sessionID + "/verify",
		header: http.Header{"User-Agent": {testPhoneAgent}}})
	wantPage(t, w, http.StatusOK, `id="applink"`)
	return scanLink(t, w.Body.String())
}

// scanLink finds the scan URL a page links to (on a phone) and returns its
// challenge id and nonce.
func scanLink(t *testing.T, page string) (id, nonce string) {
	t.Helper()
	_, rest, ok := strings.Cut(page, `id="applink" href="`)
	link, _, ok2 := strings.Cut(rest, `"`)
	if !ok || !ok2 {
		t.Fatalf("the page has no scan link:\n%s", page)
	}
	u, err := url.Parse(html.UnescapeString(link))
	if err != nil || !strings.HasPrefix(u.String(), testIssuer+"/v1/palm/challenges/") {
		t.Fatalf("scan link %q is not a scan URL of the issuer", link)
	}
	return strings.TrimPrefix(u.Path, "/v1/palm/challenges/"), u.Query().Get("nonce")
}
