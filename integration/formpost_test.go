package integration

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/palmgate/palmgate/internal/testserver"
)

var (
	formActionRE = regexp.MustCompile(`<form method="post" action="([^"]*)">`)
	formInputRE  = regexp.MustCompile(`<input type="hidden" name="([^"]*)" value="([^"]*)">`)
	formScriptRE = regexp.MustCompile(`(?s)<script>(.*?)</script>`)
)

// expectFormPost checks a form_post answer (OAuth 2.0 Form Post Response Mode): a
// 200 HTML page, not cached, whose form POSTs to redirectURI, whose only script
// is admitted by its exact hash, whose CSP has no form-action (third review) and
// lets only the redirect_uri's origin frame the page (silent renewal in a hidden
// iframe); it returns the form's fields.
func expectFormPost(t *testing.T, resp *testserver.Response, redirectURI string) url.Values {
	t.Helper()
	if resp.Status != http.StatusOK || resp.Header.Get("Location") != "" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("%s: status %d, Location %q, Content-Type %q; want a 200 HTML form_post page\nbody: %s",
			resp.Request, resp.Status, resp.Header.Get("Location"), resp.Header.Get("Content-Type"), resp.Body)
	}
	if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "no-store") {
		t.Errorf("%s: Cache-Control %q, want no-store", resp.Request, cc)
	}
	body := string(resp.Body)
	m := formActionRE.FindStringSubmatch(body)
	if m == nil || html.UnescapeString(m[1]) != redirectURI {
		t.Fatalf("%s: form action %v, want %q\nbody: %s", resp.Request, m, redirectURI, body)
	}
	fields := url.Values{}
	for _, in := range formInputRE.FindAllStringSubmatch(body, -1) {
		fields.Add(html.UnescapeString(in[1]), html.UnescapeString(in[2]))
	}
	scripts := formScriptRE.FindAllStringSubmatch(body, -1)
	if len(scripts) != 1 {
		t.Fatalf("%s: %d scripts, want exactly one (the submit)", resp.Request, len(scripts))
	}
	sum := sha256.Sum256([]byte(scripts[0][1]))
	u, _ := url.Parse(redirectURI)
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{
		"default-src 'none'",
		"script-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'",
		"frame-ancestors " + u.Scheme + "://" + u.Host, // the client's hidden iframe (prompt=none) only
	} {
		if !strings.Contains(csp, want) {
			t.Errorf("%s: Content-Security-Policy %q lacks %q", resp.Request, csp, want)
		}
	}
	// No form-action: the redirect_uri's answer may redirect on to any origin,
	// and Chromium holds those redirects to it (third review).
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "*") || strings.Contains(csp, "form-action") {
		t.Errorf("%s: Content-Security-Policy %q is not strict", resp.Request, csp)
	}
	return fields
}

// TestOIDCFormPost: response_mode=form_post answers the code, and the errors that go
// back to the client, as an auto-submitting form POSTed to the redirect_uri, also
// after the palm scan (the mode is stored with the request); discovery lists it;
// fragment and unknown modes are refused back to the client in query mode. A
// relying party takes the code from the form and redeems it.
func TestOIDCFormPost(t *testing.T) {
	t.Parallel()
	c := newOIDCClient("shop", "")
	e := startOIDC(t, []oidcClient{c})
	iss := e.URL + "/oauth2"

	var d struct {
		Modes []string `json:"response_modes_supported"`
	}
	e.do(t, "GET", "/oauth2/.well-known/openid-configuration", nil).ExpectStatus(t, http.StatusOK).Decode(t, &d)
	if strings.Join(d.Modes, ",") != "query,form_post" {
		t.Errorf("response_modes_supported %v, want [query form_post]", d.Modes)
	}

	t.Run("code after the palm scan", func(t *testing.T) {
		t.Parallel()
		for _, redirect := range c.redirects { // the second has a query of its own
			id := e.authorize(t, e.authURL(c, "response_mode", "form_post", "state", "fp-1", "redirect_uri", redirect))
			e.scan(t, e.loginPageJSON(t, id), e.subject("alice"))
			f := expectFormPost(t, e.do(t, "GET", e.verifyURL(id), nil), redirect)
			if f.Get("code") == "" || f.Get("state") != "fp-1" || f.Get("iss") != iss || len(f) != 3 {
				t.Fatalf("form fields %v, want exactly code, state fp-1 and iss %s", f, iss)
			}
			expectOAuthError(t, e.do(t, "GET", e.verifyURL(id), nil), http.StatusBadRequest, "invalid_request")
			form := url.Values{"grant_type": {"authorization_code"}, "code": {f.Get("code")}, "redirect_uri": {redirect},
				"client_id": {c.id}, "client_secret": {c.secret}}
			if m := e.postToken(t, form).ExpectStatus(t, http.StatusOK).Object(t); str(m["access_token"]) == "" || str(m["id_token"]) == "" {
				t.Errorf("token response %v, want tokens for the form_post code", m)
			}
		}
	})
	t.Run("denied login", func(t *testing.T) {
		t.Parallel()
		id := e.authorize(t, e.authURL(c, "response_mode", "form_post", "state", "fp-2"))
		p := e.loginPageJSON(t, id)
		e.do(t, "POST", "/v1/palm/challenges/"+p.ChallengeID+"/deny", map[string]string{"nonce": p.Nonce}).ExpectStatus(t, http.StatusOK)
		f := expectFormPost(t, e.do(t, "GET", e.verifyURL(id), nil), c.redirects[0])
		if f.Get("error") != "access_denied" || f.Get("error_description") == "" || f.Get("state") != "fp-2" || f.Get("iss") != iss || f.Has("code") {
			t.Errorf("form fields %v, want access_denied with a description, state fp-2 and iss", f)
		}
	})
	t.Run("refusals in form_post", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name  string
			url   string
			code  string
			state string
		}{
			{"scope without openid", e.authURL(c, "response_mode", "form_post", "state", "fp-3", "scope", "profile"), "invalid_scope", "fp-3"},
			{"prompt=none", e.authURL(c, "response_mode", "form_post", "state", "fp-4", "prompt", "none"), "login_required", "fp-4"},
			{"PKCE plain", e.authURL(c, "response_mode", "form_post", "state", "fp-5", "code_challenge", strings.Repeat("a", 43), "code_challenge_method", "plain"), "invalid_request", "fp-5"},
			{"over-long state: dropped", e.authURL(c, "response_mode", "form_post", "state", strings.Repeat("s", 501)), "invalid_request", ""},
		} {
			f := expectFormPost(t, e.do(t, "GET", tc.url, nil), c.redirects[0])
			if f.Get("error") != tc.code || f.Get("error_description") == "" || f.Get("state") != tc.state || f.Get("iss") != iss || f.Has("code") {
				t.Errorf("%s: form fields %v, want error %s with a description, state %q and iss", tc.name, f, tc.code, tc.state)
			}
		}
		// A form_post script can escape nothing: a hostile state is an attribute value.
		hostile := `"><script>alert(1)</script>`
		resp := e.do(t, "GET", e.authURL(c, "response_mode", "form_post", "state", hostile, "scope", "profile"), nil)
		if f := expectFormPost(t, resp, c.redirects[0]); f.Get("state") != hostile {
			t.Errorf("hostile state came back as %q", f.Get("state"))
		}
	})
	t.Run("fragment and unknown modes: refused in query mode", func(t *testing.T) {
		t.Parallel()
		for _, mode := range []string{"fragment", "web_message", "FORM_POST"} {
			q := expectRedirectedError(t, e.do(t, "GET", e.authURL(c, "response_mode", mode, "state", "m1"), nil), c.redirects[0], "invalid_request")
			if q.Get("state") != "m1" {
				t.Errorf("response_mode %s: state %q went back, want m1", mode, q.Get("state"))
			}
		}
	})
	t.Run("unknown client: 400, no form", func(t *testing.T) {
		t.Parallel()
		expectOAuthError(t, e.do(t, "GET", e.authURL(c, "response_mode", "form_post", "client_id", "nobody"), nil), http.StatusBadRequest, "invalid_request")
	})
}

// TestBrowserFormPost: in headless Chromium, the form_post page's script runs under
// its CSP (by hash) and POSTs the code to the relying party's redirect_uri.
func TestBrowserFormPost(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var posted url.Values
	rp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		if r.Method == http.MethodPost {
			posted, _ = url.ParseQuery(string(body))
		}
		mu.Unlock()
		fmt.Fprintf(w, `<!doctype html><title>rp</title><p id="rp-done">%s</p>`, r.Method)
	}))
	t.Cleanup(rp.Close)
	c := oidcClient{id: "fp", secret: "secret-" + randHex(16), name: "Form post app", redirects: []string{rp.URL + "/cb"}}
	e := startOIDC(t, []oidcClient{c})
	ctx := startChromium(t)
	done := simulateLogin(t, ctx, e.authURL(c, "response_mode", "form_post", "state", "b-1"), e.subject("browser-user"), "#rp-done")
	mu.Lock()
	got := posted
	mu.Unlock()
	if done != "POST" || got.Get("code") == "" || got.Get("state") != "b-1" || got.Get("iss") != e.URL+"/oauth2" {
		t.Fatalf("the relying party saw %q with form %v, want a POST with code, state b-1 and iss", done, got)
	}
	if m := e.exchange(t, c, got.Get("code"), ""); str(m["id_token"]) == "" {
		t.Errorf("token response %v", m)
	}
}
