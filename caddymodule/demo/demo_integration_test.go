package demo_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
)

func TestMain(m *testing.M) { testserver.Main(m) }

const demoSecret = "demo-secret-for-tests"

var (
	subRE      = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`) // base64url of an HMAC-SHA256
	pageSubRE  = regexp.MustCompile(`<code class="sub" id="sub">([^<]*)</code>`)
	userinfoRE = regexp.MustCompile(`(?s)<pre id="userinfo">(.*?)</pre>`)
	idClaimsRE = regexp.MustCompile(`(?s)<pre id="id-claims">(.*?)</pre>`)
)

// demoServer is a dev-mode palmgate whose site serves the demo, with a handler
// after it that answers "next handler".
type demoServer struct {
	*testserver.Server
	callback string // the demo client's redirect_uri
}

func demoOptions(t *testing.T, port int, site string) testserver.Options {
	t.Helper()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	return testserver.Options{
		Port: port,
		Global: "client demo {\n" +
			"secret " + demoSecret + "\n" +
			"redirect_uri " + base + "/demo/callback\n" +
			"name \"palmgate demo app\"\n}",
		Site: site,
	}
}

func startDemo(t *testing.T) *demoServer {
	t.Helper()
	port := testserver.FreePort(t)
	s := testserver.Start(t, demoOptions(t, port, "palmgate\npalmgate_demo demo\nrespond \"next handler\" 200"))
	return &demoServer{Server: s, callback: s.URL + "/demo/callback"}
}

// browser keeps cookies and never follows redirects: each hop is checked.
type browser struct {
	client *http.Client
	jar    *cookiejar.Jar
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{jar: jar, client: &http.Client{
		Jar:     jar,
		Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}}
}

func (b *browser) do(t *testing.T, method, u string, headers ...string) *testserver.Response {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, u, err)
	}
	return &testserver.Response{Status: resp.StatusCode, Header: resp.Header, Body: body, Request: method + " " + u}
}

func (b *browser) get(t *testing.T, u string, headers ...string) *testserver.Response {
	t.Helper()
	return b.do(t, http.MethodGet, u, headers...)
}

// location returns the response's redirect target, failing unless it is a 302
// whose target starts with prefix.
func location(t *testing.T, r *testserver.Response, prefix string) string {
	t.Helper()
	r.ExpectStatus(t, http.StatusFound)
	loc := r.Header.Get("Location")
	if !strings.HasPrefix(loc, prefix) {
		t.Fatalf("%s: Location %q, want it to start with %q", r.Request, loc, prefix)
	}
	return loc
}

// openLogin starts a login at /demo/login and follows it to palmgate's login
// page; it returns the login page URL, the open challenge and the state sent.
func (s *demoServer) openLogin(t *testing.T, b *browser) (verifyURL, challengeID, nonce, state string) {
	t.Helper()
	resp := b.get(t, s.URL+"/demo/login")
	authorize := location(t, resp, s.URL+"/oauth2/authorize?")
	setCookie := resp.Header.Get("Set-Cookie")
	for _, attr := range []string{"palmgate_demo_login=", "Path=/demo", "HttpOnly", "SameSite=Lax", "Max-Age="} {
		if !strings.Contains(setCookie, attr) {
			t.Errorf("/demo/login Set-Cookie %q lacks %s", setCookie, attr)
		}
	}
	u, err := url.Parse(authorize)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for name, want := range map[string]string{
		"client_id": "demo", "response_type": "code", "redirect_uri": s.callback,
		"scope": "openid offline_access", "code_challenge_method": "S256",
	} {
		if got := q.Get(name); got != want {
			t.Errorf("authorize %s = %q, want %q", name, got, want)
		}
	}
	if len(q.Get("code_challenge")) != 43 || len(q.Get("state")) < 22 || len(q.Get("nonce")) < 22 {
		t.Errorf("authorize request lacks a PKCE challenge, state or nonce: %s", authorize)
	}
	verifyURL = location(t, b.get(t, authorize), s.URL+"/oauth2/verify?auth_request_id=")
	var c struct {
		ChallengeID string `json:"challengeId"`
		Nonce       string `json:"nonce"`
		Status      string `json:"status"`
	}
	b.get(t, verifyURL, "Accept", "application/json").ExpectStatus(t, http.StatusOK).Decode(t, &c)
	if c.Status != "pending" || c.ChallengeID == "" || c.Nonce == "" {
		t.Fatalf("login page JSON: %+v, want a pending challenge", c)
	}
	return verifyURL, c.ChallengeID, c.Nonce, q.Get("state")
}

// login runs a whole palm login for palmSubject up to the callback URL palmgate
// redirects to (not yet visited).
func (s *demoServer) login(t *testing.T, b *browser, palmSubject string) string {
	t.Helper()
	verifyURL, challengeID, nonce, state := s.openLogin(t, b)
	testserver.Do(t, "POST", s.URL+"/v1/palm/challenges/"+challengeID+"/dev-scan",
		map[string]string{"nonce": nonce, "palmSubject": palmSubject}).ExpectStatus(t, http.StatusOK)
	cb := location(t, b.get(t, verifyURL), s.callback+"?")
	u, _ := url.Parse(cb)
	if u.Query().Get("code") == "" || u.Query().Get("state") != state {
		t.Fatalf("callback %s: want a code and state %q", cb, state)
	}
	return cb
}

// signedIn visits the callback and returns the sub the page shows, checking the
// page's claims and userinfo blocks agree with it and that no token leaks.
func (s *demoServer) signedIn(t *testing.T, b *browser, callback, palmSubject string) string {
	t.Helper()
	resp := b.get(t, callback).ExpectStatus(t, http.StatusOK)
	body := string(resp.Body)
	if strings.Contains(body, "eyJ") {
		t.Errorf("the result page shows a raw JWT:\n%s", body)
	}
	if strings.Contains(body, palmSubject) {
		t.Errorf("the result page reveals the raw palm subject %q", palmSubject)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "'nonce-") {
		t.Errorf("result page CSP %q", csp)
	}
	m := pageSubRE.FindStringSubmatch(body)
	if m == nil || !subRE.MatchString(m[1]) {
		t.Fatalf("the result page shows no 43-character base64url sub:\n%s", body)
	}
	sub := m[1]
	var info, claims map[string]any
	for _, block := range []struct {
		re  *regexp.Regexp
		dst *map[string]any
	}{{userinfoRE, &info}, {idClaimsRE, &claims}} {
		bm := block.re.FindStringSubmatch(body)
		if bm == nil {
			t.Fatalf("the result page lacks %s:\n%s", block.re, body)
		}
		if err := json.Unmarshal([]byte(html.UnescapeString(bm[1])), block.dst); err != nil {
			t.Fatalf("block %s is not JSON: %v\n%s", block.re, err, bm[1])
		}
	}
	if info["sub"] != sub || claims["sub"] != sub {
		t.Errorf("sub %q, userinfo sub %v, ID token sub %v: want all equal", sub, info["sub"], claims["sub"])
	}
	if aud := fmt.Sprint(claims["aud"]); claims["iss"] != s.URL+"/oauth2" || (aud != "demo" && aud != "[demo]") || claims["nonce"] == nil {
		t.Errorf("ID token claims: %v; want iss %s/oauth2, aud demo and a nonce", claims, s.URL)
	}
	for _, want := range []string{"<code>openid</code>", "<code>offline_access</code>", "issued (scope offline_access)"} {
		if !strings.Contains(body, want) {
			t.Errorf("the access token section lacks %q", want)
		}
	}
	return sub
}

// userinfoSub logs palmSubject in as client demo directly, as another instance of
// the application would, and returns what /oauth2/userinfo answers for it.
func (s *demoServer) userinfoSub(t *testing.T, palmSubject string) string {
	t.Helper()
	b := newBrowser(t)
	q := url.Values{"client_id": {"demo"}, "redirect_uri": {s.callback}, "response_type": {"code"}, "scope": {"openid"}, "state": {"direct"}}
	verifyURL := location(t, b.get(t, s.URL+"/oauth2/authorize?"+q.Encode()), s.URL+"/oauth2/verify?")
	var c struct{ ChallengeID, Nonce string }
	b.get(t, verifyURL, "Accept", "application/json").ExpectStatus(t, http.StatusOK).Decode(t, &c)
	testserver.Do(t, "POST", s.URL+"/v1/palm/challenges/"+c.ChallengeID+"/dev-scan",
		map[string]string{"nonce": c.Nonce, "palmSubject": palmSubject}).ExpectStatus(t, http.StatusOK)
	cb, _ := url.Parse(location(t, b.get(t, verifyURL), s.callback+"?"))
	form := url.Values{"grant_type": {"authorization_code"}, "code": {cb.Query().Get("code")}, "redirect_uri": {s.callback},
		"client_id": {"demo"}, "client_secret": {demoSecret}}
	status, tok := testserver.DoJSON(t, "POST", s.URL+"/oauth2/token", form.Encode(), "Content-Type", "application/x-www-form-urlencoded")
	if status != http.StatusOK {
		t.Fatalf("token: status %d: %v", status, tok)
	}
	status, info := testserver.DoJSON(t, "GET", s.URL+"/oauth2/userinfo", nil, "Authorization", fmt.Sprint("Bearer ", tok["access_token"]))
	if status != http.StatusOK {
		t.Fatalf("userinfo: status %d: %v", status, info)
	}
	sub, _ := info["sub"].(string)
	return sub
}

func TestDemoLogin(t *testing.T) {
	s := startDemo(t)
	b := newBrowser(t)

	home := b.get(t, s.URL+"/demo").ExpectStatus(t, http.StatusOK)
	for _, want := range []string{"palmgate demo app", "Log in with palm", `href="` + s.URL + `/demo/login"`} {
		if !strings.Contains(string(home.Body), want) {
			t.Errorf("/demo lacks %q:\n%s", want, home.Body)
		}
	}

	alice := "alice-" + rand.Text()
	sub := s.signedIn(t, b, s.login(t, b, alice), alice)
	for _, c := range b.jar.Cookies(mustURL(t, s.URL+"/demo/")) {
		if c.Name == "palmgate_demo_login" {
			t.Errorf("the login cookie survives the callback")
		}
	}
	if direct := s.userinfoSub(t, alice); direct != sub {
		t.Errorf("the demo shows sub %q, userinfo answers %q for the same person and client", sub, direct)
	}

	t.Run("the callback works once", func(t *testing.T) {
		cb := s.login(t, b, alice)
		if again := s.signedIn(t, b, cb, alice); again != sub {
			t.Errorf("second login of the same palm: sub %q, want %q", again, sub)
		}
		resp := b.get(t, cb).ExpectStatus(t, http.StatusBadRequest)
		if !strings.Contains(string(resp.Body), "No login in progress") {
			t.Errorf("replayed callback: %s", resp.Body)
		}
	})
	t.Run("another person, another sub", func(t *testing.T) {
		bob := "bob-" + rand.Text()
		if other := s.signedIn(t, b, s.login(t, b, bob), bob); other == sub {
			t.Errorf("bob and alice share sub %q", sub)
		}
	})
	t.Run("logout clears the login cookie", func(t *testing.T) {
		b := newBrowser(t)
		b.get(t, s.URL+"/demo/login").ExpectStatus(t, http.StatusFound)
		resp := b.get(t, s.URL+"/demo/logout").ExpectStatus(t, http.StatusSeeOther)
		if resp.Header.Get("Location") != "/demo" {
			t.Errorf("logout Location %q, want /demo", resp.Header.Get("Location"))
		}
		if len(b.jar.Cookies(mustURL(t, s.URL+"/demo/callback"))) != 0 {
			t.Errorf("a cookie survives logout")
		}
	})
}

func TestDemoRefusesBadCallbacks(t *testing.T) {
	s := startDemo(t)

	t.Run("wrong state", func(t *testing.T) {
		b := newBrowser(t)
		cb := s.login(t, b, "carol-"+rand.Text())
		u := mustURL(t, cb)
		q := u.Query()
		q.Set("state", "forged")
		u.RawQuery = q.Encode()
		resp := b.get(t, u.String()).ExpectStatus(t, http.StatusBadRequest)
		if !strings.Contains(string(resp.Body), "state parameter does not match") {
			t.Errorf("wrong state: %s", resp.Body)
		}
		if strings.Contains(string(resp.Body), `id="sub"`) {
			t.Errorf("a callback with a wrong state signed someone in")
		}
	})
	t.Run("no login cookie", func(t *testing.T) {
		resp := newBrowser(t).get(t, s.callback+"?code=x&state=y").ExpectStatus(t, http.StatusBadRequest)
		if !strings.Contains(string(resp.Body), "No login in progress") {
			t.Errorf("no cookie: %s", resp.Body)
		}
	})
	t.Run("declined", func(t *testing.T) {
		b := newBrowser(t)
		verifyURL, challengeID, nonce, state := s.openLogin(t, b)
		testserver.Do(t, "POST", s.URL+"/v1/palm/challenges/"+challengeID+"/deny", map[string]string{"nonce": nonce}).ExpectStatus(t, http.StatusOK)
		cb := location(t, b.get(t, verifyURL), s.callback+"?")
		if q := mustURL(t, cb).Query(); q.Get("error") != "access_denied" || q.Get("state") != state {
			t.Fatalf("callback after a denial: %s", cb)
		}
		resp := b.get(t, cb).ExpectStatus(t, http.StatusBadRequest)
		if !strings.Contains(string(resp.Body), "Login was declined") {
			t.Errorf("declined: %s", resp.Body)
		}
	})
	t.Run("only its own paths", func(t *testing.T) {
		for _, p := range []string{"/demo/", "/demox", "/demo/other", "/other"} {
			resp := testserver.Do(t, "GET", s.URL+p, nil).ExpectStatus(t, http.StatusOK)
			if string(resp.Body) != "next handler" {
				t.Errorf("GET %s: %q, want the next handler's answer", p, resp.Body)
			}
		}
		resp := testserver.Do(t, "POST", s.URL+"/demo", nil).ExpectStatus(t, http.StatusMethodNotAllowed)
		if resp.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("POST /demo: Allow %q", resp.Header.Get("Allow"))
		}
	})
}

func TestDemoProvisioning(t *testing.T) {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	attestor := "palm_attestor engine " + base64.StdEncoding.EncodeToString(der)
	for _, tc := range []struct {
		name   string
		noDev  bool
		global string // replaces the demo client block when set
		site   string
		want   string
	}{
		{"refused without dev", true, "", "palmgate\npalmgate_demo demo", "palmgate_demo runs only in dev mode"},
		{"unknown client", false, "", "palmgate\npalmgate_demo nosuch", "palmgate_demo: no client"},
		{"redirect_uri elsewhere", false, "client demo {\nsecret s\nredirect_uri http://127.0.0.1:1/callback\n}", "palmgate\npalmgate_demo demo", "/demo/callback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := demoOptions(t, testserver.FreePort(t), tc.site) // a real port: redirect URIs refuse port 0
			if tc.global != "" {
				opts.Global = tc.global
			}
			if tc.noDev {
				opts.NoDev = true
				opts.Global += "\n" + attestor
			}
			out := testserver.StartExpectFailure(t, opts)
			if !strings.Contains(out, tc.want) {
				t.Errorf("server output lacks %q:\n%s", tc.want, out)
			}
		})
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
