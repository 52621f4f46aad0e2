package edge_test

import (
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/brand"
)

var testBrand = brand.Brand{Name: `Acme <b>"ID"</b>`, LogoURL: "https://cdn.acme.example/logo.svg?a=1&b=2", Color: "#0b5fff"}

// wantBrand checks that page w shows b (escaped) and that its CSP admits the
// logo's origin in img-src and no other https source.
func wantBrand(t *testing.T, name string, w *recorder, b brand.Brand) {
	t.Helper()
	body := w.Body.String()
	csp := w.Header().Get("Content-Security-Policy")
	imgSrc := ""
	if m := regexp.MustCompile(`img-src ([^;]*)`).FindStringSubmatch(csp); m != nil {
		imgSrc = strings.TrimPrefix(m[1], "data: ")
	}
	if b.Name == "" {
		if !strings.Contains(body, `<div class="brand" id="brand"><span>●</span> palmgate</div>`) || (imgSrc != "" && imgSrc != "data:") {
			t.Errorf("%s without a brand: want palmgate's own and no https image source; CSP %q\n%s", name, csp, body)
		}
		return
	}
	if !strings.Contains(body, `Acme &lt;b&gt;&#34;ID&#34;&lt;/b&gt;`) || strings.Contains(body, `<b>"ID"</b>`) {
		t.Errorf("%s: the brand name is missing or unescaped:\n%s", name, body)
	}
	if !strings.Contains(body, `<img id="brand-logo" src="https://cdn.acme.example/logo.svg?a=1&amp;b=2" alt="">`) {
		t.Errorf("%s: no brand logo:\n%s", name, body)
	}
	if !strings.Contains(body, ":root{--accent:#0b5fff}") {
		t.Errorf("%s: no brand colour:\n%s", name, body)
	}
	if !strings.Contains(body, "<title>") || !strings.Contains(body, "· Acme &lt;b&gt;") {
		t.Errorf("%s: the title does not name the brand", name)
	}
	if imgSrc != "https://cdn.acme.example" {
		t.Errorf("%s: CSP %q, want img-src to admit https://cdn.acme.example and no other https source", name, csp)
	}
}

// brandPages opens every page that shows the brand and returns them by name:
// login, registration, consent (SSO), signed-out, agents (its palm step and its
// verified list).
func brandPages(t *testing.T, e *testEnv) map[string]*recorder {
	t.Helper()
	pages := map[string]*recorder{}
	l := e.authorize(t, authorizeQuery())
	pages["login"] = e.do(t, req{method: http.MethodGet, target: "/oauth2/verify?auth_request_id=" + l.id, cookies: []*http.Cookie{l.cookie}})
	w := e.postJSON(t, "/v1/agent/register/init", newAgent("brand-agent").registration(e.clock.Now()))
	wantStatus(t, w, http.StatusCreated)
	sessionID, _ := decode(t, w)["sessionId"].(string)
	pages["registration"] = e.get(t, "/v1/agent/register/"+sessionID+"/verify")
	pages["signed-out"] = e.get(t, "/oauth2/logout")
	pages["agents (palm step)"] = e.get(t, "/v1/human/agents")
	cookie, _ := e.ownerSignIn(t, "alice")
	pages["agents"] = e.do(t, req{method: http.MethodGet, target: "/v1/human/agents", cookies: []*http.Cookie{cookie}})

	// The consent page: a login that starts the SSO session, then prompt=consent.
	id, nonce := e.challenge(t, l)
	e.devScan(t, id, nonce, "alice")
	w = e.do(t, req{method: http.MethodGet, target: "/oauth2/verify?auth_request_id=" + l.id, cookies: []*http.Cookie{l.cookie}})
	sess := cookieNamed(w, "__Host-palmgate_session")
	if sess == nil {
		t.Fatal("the login started no SSO session")
	}
	q := authorizeQuery()
	q.Set("prompt", "consent")
	w = e.do(t, req{method: http.MethodGet, target: "/oauth2/authorize?" + q.Encode(), cookies: []*http.Cookie{sess}})
	wantStatus(t, w, http.StatusFound)
	var login *http.Cookie
	for _, c := range w.Result().Cookies() {
		if strings.HasPrefix(c.Name, "__Host-palmgate_login_") {
			login = c
		}
	}
	pages["consent"] = e.do(t, req{method: http.MethodGet, target: w.Header().Get("Location"), cookies: []*http.Cookie{sess, login}})
	for name, w := range pages {
		wantPage(t, w, http.StatusOK, "<main>")
		_ = name
	}
	return pages
}

// TestBrandOnEveryPage: the operator's brand (name escaped, logo, colour) is on
// the login, registration, consent, signed-out and agents pages, each CSP
// admitting the logo's origin and nothing more; without a brand, palmgate's own.
func TestBrandOnEveryPage(t *testing.T) {
	for _, b := range []brand.Brand{testBrand, {}} {
		e := newEnv(t, withSSO(time.Hour), func(o *envOptions) { o.brand = b })
		for name, w := range brandPages(t, e) {
			wantBrand(t, name, w, b)
		}
	}
}

// TestPagesLocalTimesAndScopes: the login page lists the scopes with their words
// and prints its expiry as a <time> the page's script rewrites in the browser's
// locale, the UTC text staying for no script; the agents page does the same
// with its times, its script admitted by the CSP nonce.
func TestPagesLocalTimesAndScopes(t *testing.T) {
	e := newEnv(t, withSSO(time.Hour))
	pages := brandPages(t, e)
	timeRE := regexp.MustCompile(`<time class="local" datetime="(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)" data-form="(time|date)">[^<]*\(UTC\)</time>`)
	for _, name := range []string{"login", "registration", "agents"} {
		body := html.UnescapeString(pages[name].Body.String())
		if !timeRE.MatchString(body) {
			t.Errorf("%s page: no <time datetime> with a UTC fallback:\n%s", name, body)
		}
		nonce := regexp.MustCompile(`script-src 'nonce-([^']+)'`).FindStringSubmatch(pages[name].Header().Get("Content-Security-Policy"))
		if nonce == nil || !strings.Contains(body, `<script nonce="`+nonce[1]+`">`+"\n(function () {\n  var els = document.querySelectorAll(\"time.local\")") {
			t.Errorf("%s page: the local-time script is missing or not admitted by the CSP nonce", name)
		}
	}
	if strings.Contains(pages["agents"].Body.String(), "(UTC)</th>") {
		t.Error("the agents page still heads a column (UTC)")
	}
	for _, name := range []string{"login", "consent"} {
		body := pages[name].Body.String()
		for _, want := range []string{
			`<ul class="scopes" id="scopes">`,
			`<li data-scope="openid">A private identifier for you, only for this app. Never your palm data. <code>openid</code></li>`,
			`<li data-scope="offline_access">It can keep you signed in. <code>offline_access</code></li>`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("%s page lacks %q:\n%s", name, want, body)
			}
		}
	}
}
