package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/palmgate/palmgate/internal/tooltest"
)

// spaServer serves integration/rp/spa (the page, app.js and the oidc-client-ts
// ES modules from its npm ci'd node_modules) on its own origin, with
// /config.json naming the issuer and client (and, for TestSPASilentRenewal, the
// scope and the flow).
func spaServer(t *testing.T, config func() map[string]string) *httptest.Server {
	t.Helper()
	dir, err := filepath.Abs("rp/spa")
	if err != nil {
		t.Fatal(err)
	}
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/config.json":
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(config())
		case r.URL.Path == "/" || r.URL.Path == "/callback" || r.URL.Path == "/silent" || r.URL.Path == "/signedout":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			b, _ := os.ReadFile(filepath.Join(dir, "index.html"))
			_, _ = w.Write(b)
		case r.URL.Path == "/app.js" || strings.HasPrefix(r.URL.Path, "/node_modules/oidc-client-ts/dist/esm/") ||
			strings.HasPrefix(r.URL.Path, "/node_modules/jwt-decode/build/esm/"):
			files.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// corsSeen records what the browser saw of palmgate's discovery answers, in
// order: the Access-Control-Allow-Origin of each answer the page could read, and
// "cors:<reason>" for each the browser withheld from the page (Chromium reports a
// CORS-blocked answer as a failed load, MissingAllowOriginHeader when it had no
// Access-Control-Allow-Origin).
type corsSeen struct {
	mu        sync.Mutex
	discovery map[network.RequestID]bool
	got       []string
}

func (c *corsSeen) listen(t *testing.T, ctx context.Context) {
	t.Helper()
	c.discovery = map[network.RequestID]bool{}
	err := chromedp.Listen(ctx, func(ev any) {
		c.mu.Lock()
		defer c.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			if e.Request != nil && strings.Contains(e.Request.URL, "/.well-known/openid-configuration") {
				c.discovery[e.RequestID] = true
			}
		case *network.EventResponseReceived:
			if !c.discovery[e.RequestID] || e.Response == nil {
				return
			}
			acao := ""
			for k, v := range e.Response.Headers {
				if strings.EqualFold(k, "Access-Control-Allow-Origin") {
					acao, _ = v.(string)
				}
			}
			c.got = append(c.got, acao)
		case *network.EventLoadingFailed:
			if c.discovery[e.RequestID] && e.CorsErrorStatus != nil {
				c.got = append(c.got, "cors:"+string(e.CorsErrorStatus.CorsError))
			}
		}
	})
	if err != nil {
		t.Fatalf("listening to the browser's network events: %v", err)
	}
}

// take returns what was recorded and forgets it.
func (c *corsSeen) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	got := c.got
	c.got = nil
	return got
}

// TestSPAPublicClient (issue 21): a single-page app with oidc-client-ts, served
// on its own origin, logs in through headless Chromium as a public client with
// PKCE (a simulated palm scan), calls userinfo across origins, renews with its
// rotating refresh token (signinSilent), and sees its rotated-out refresh token
// refused; the same app served from an origin palmgate does not allow reads the
// public discovery but stops on palmgate's error page, its redirect URI unknown
// (fourth review; before, discovery refused it). (Its origin is
// same-site with palmgate's; TestSPACrossSiteRenewal renews from another site,
// TestSPASilentRenewal in a hidden iframe.)
func TestSPAPublicClient(t *testing.T) {
	t.Parallel()
	tooltest.Chromium.Need(t) // before any server starts
	npmCI(t, "rp/spa")

	var issuer string
	config := func() map[string]string { return map[string]string{"authority": issuer, "client_id": "spa"} }
	app := spaServer(t, config)
	foreign := spaServer(t, config) // another origin (port), not allowed
	spa := oidcClient{id: "spa", name: "Test SPA", public: true, redirects: []string{app.URL + "/callback"}, scopes: testScopes}
	e := startOIDC(t, []oidcClient{spa})
	issuer = e.URL + "/oauth2"

	ctx := startChromium(t)
	seen := &corsSeen{}
	seen.listen(t, ctx)

	simulateLogin(t, ctx, app.URL+"/", "alice", "#reuse")
	read := func(id string) map[string]any {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, rpStep)
		defer cancel()
		text, err := chromedp.Run(c, chromedp.Text(chromedp.ID(id)))
		if err != nil {
			t.Fatalf("reading #%s: %v", id, err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(text), &m); err != nil {
			t.Fatalf("#%s: %q is not JSON", id, text)
		}
		return m
	}
	if u := read("userinfo"); u["status"] != float64(200) || !subRE.MatchString(str(u["sub"])) || u["sameAsIDToken"] != true {
		t.Errorf("userinfo across origins: %v, want 200 and the ID token's pairwise sub", u)
	}
	if r := read("renewed"); r["hadRefreshToken"] != true || r["rotated"] != true || r["newAccessToken"] != true || r["sameSub"] != true {
		t.Errorf("renewal with the refresh token: %v, want a rotated refresh token and a new access token for the same sub", r)
	}
	if r := read("reuse"); r["status"] != float64(400) || r["error"] != "invalid_grant" {
		t.Errorf("the rotated-out refresh token replayed: %v, want 400 invalid_grant readable by the app", r)
	}
	if got := seen.take(); len(got) == 0 || got[0] != app.URL {
		t.Errorf("discovery answers to the app's origin carried Access-Control-Allow-Origin %q, want %q", got, app.URL)
	}

	// The same app from an origin that is not allowed: discovery is public (fourth
	// review: a page of any origin reads it, as it reads the JWKS), but the
	// authorization request names a redirect URI palmgate does not know, so the
	// browser stops on palmgate's error page, never back at the foreign page. The
	// foreign app is on localhost, not 127.0.0.1: a public client's loopback IP
	// redirect URI matches any port (RFC 8252 7.3), localhost only its own.
	foreignURL := strings.Replace(foreign.URL, "127.0.0.1", "localhost", 1)
	browserStep(t, ctx, "opening the app on a foreign origin",
		chromedp.Navigate(foreignURL+"/"),
		chromedp.WaitVisible(chromedp.ID("title")),
	)
	c, cancel := context.WithTimeout(ctx, rpStep)
	defer cancel()
	title, err := chromedp.Run(c, chromedp.Text(chromedp.ID("title")))
	if err != nil {
		t.Fatal(err)
	}
	loc, err := chromedp.Run(c, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if title != "This sign-in link is not valid" || !strings.HasPrefix(loc, e.URL+"/oauth2/authorize") {
		t.Errorf("the app on the foreign origin: the browser is at %s showing %q, want palmgate's error page", loc, title)
	}
	if got := seen.take(); len(got) == 0 || got[0] != foreignURL {
		t.Errorf("discovery answers to the foreign origin carried Access-Control-Allow-Origin %q, want %q (public)", got, foreignURL)
	}
	t.Logf("the app on the foreign origin stopped at palmgate's error page: %s", title)
}
