package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/palmgate/palmgate/internal/testserver"
	"github.com/palmgate/palmgate/internal/tooltest"
)

// browserWait bounds how long the browser may take to reach the relying party
// by the login page's own polling (every 2 s) once the palm is verified.
const browserWait = 15 * time.Second

// callbackRecorder is the relying party's redirect_uri: it records the query
// of every request to /callback and answers a small page.
type callbackRecorder struct {
	mu  sync.Mutex
	got []string // raw queries
	hit chan struct{}
}

func (c *callbackRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/callback" {
		http.NotFound(w, r)
		return
	}
	c.mu.Lock()
	c.got = append(c.got, r.URL.RawQuery)
	c.mu.Unlock()
	select {
	case c.hit <- struct{}{}:
	default:
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprint(w, `<!doctype html><title>Relying party callback</title><p id="rp-done">Signed in.</p>`)
}

func (c *callbackRecorder) queries() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.got...)
}

// TestBrowserLogin drives a login in headless Chromium: the browser opens the
// authorization URL, shows the login page with its QR code, and, once the palm
// assertion arrives over HTTP, reaches the relying party's callback by the
// page's own polling, with a code that exchanges for tokens.
func TestBrowserLogin(t *testing.T) {
	t.Parallel()
	tooltest.Chromium.Need(t) // $PALMGATE_CHROMIUM or /usr/bin/chromium; before any server starts

	cb := &callbackRecorder{hit: make(chan struct{}, 1)}
	rpServer := httptest.NewServer(cb)
	t.Cleanup(rpServer.Close)
	client := oidcClient{
		id: "browser-app", secret: "secret-" + randHex(16), name: "Palm Shop",
		redirects: []string{rpServer.URL + "/callback"}, scopes: testScopes,
	}
	at := newEd25519Attestor(t, "palm-engine")
	e := startOIDC(t, []oidcClient{client}, at.config())
	rp := newRelyingParty(t, e, client, oauth2.AuthStyleInHeader, oidc.ScopeOpenID, "orders:read")
	state, nonce, verifier := "state-"+randHex(12), "nonce-"+randHex(12), oauth2.GenerateVerifier()
	authURL := rp.conf.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier))

	step := newChromium(t) // every step below is bounded

	// 1. The authorization URL lands on the login page.
	resp, err := chromedp.Run(step(20*time.Second), chromedp.NavigateResponse(authURL))
	if err != nil {
		t.Fatalf("navigating to %s: %v", authURL, err)
	}
	if resp.Status != http.StatusOK || !strings.HasPrefix(resp.MimeType, "text/html") {
		t.Fatalf("login page: status %d %s, want 200 text/html", resp.Status, resp.MimeType)
	}
	loc, err := chromedp.Run(step(5*time.Second), chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	id, ok := strings.CutPrefix(loc, e.URL+"/oauth2/verify?auth_request_id=")
	if !ok || !uuidRE.MatchString(id) {
		t.Fatalf("browser location %q, want the login page %s/oauth2/verify?auth_request_id=<uuid>", loc, e.URL)
	}

	// 2. The page: title, text, and a QR code that the browser decoded.
	title, err := chromedp.Run(step(5*time.Second), chromedp.Title())
	if err != nil || title != "Sign in with your palm · palmgate" {
		t.Errorf("login page title %q (%v), want %q", title, err, "Sign in with your palm · palmgate")
	}
	text, err := chromedp.Run(step(5*time.Second), chromedp.Text(chromedp.CSS("main")))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Palm Shop", "orders:read", "Waiting for your palm scan", "Simulate palm scan"} {
		if !strings.Contains(text, want) {
			t.Errorf("login page text lacks %q:\n%s", want, text)
		}
	}
	type qrInfo struct {
		Complete     bool   `json:"complete"`
		NaturalWidth int    `json:"naturalWidth"`
		Src          string `json:"src"`
	}
	qr, err := chromedp.Run(step(5*time.Second), chromedp.Evaluate[qrInfo](`(() => {
		const img = document.getElementById("qr");
		return {complete: !!img && img.complete, naturalWidth: img ? img.naturalWidth : 0,
			src: img ? img.getAttribute("src") : ""};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if !qr.Complete || qr.NaturalWidth < 100 || !strings.HasPrefix(qr.Src, "data:image/png;base64,") {
		t.Errorf("QR image (%v, %d px, %.32q), want a loaded data:image/png of at least 100 px", qr.Complete, qr.NaturalWidth, qr.Src)
	}
	// The phone scans the QR code the browser shows: its scan URL carries the nonce,
	// which only that browser's page reveals.
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(qr.Src, "data:image/png;base64,"))
	if err != nil {
		t.Fatalf("QR data URI: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("QR image: %v", err)
	}
	scanURL, err := testserver.DecodeQR(img)
	if err != nil {
		t.Fatalf("the QR code the browser shows does not decode: %v", err)
	}
	page, ok := parseScanURL(scanURL)
	if !ok || !strings.HasPrefix(scanURL, e.URL+"/v1/palm/challenges/") {
		t.Fatalf("the QR code encodes %q, want a scan URL", scanURL)
	}
	if st := e.do(t, "GET", e.verifyURL(id), nil, "Accept", "application/json").Object(t); str(st["status"]) != "pending" || str(st["challengeId"]) != page.ChallengeID {
		t.Errorf("login page JSON %v, want pending and the QR code's challenge %s", st, page.ChallengeID)
	}
	shot, err := chromedp.Run(step(10*time.Second), chromedp.CaptureScreenshot())
	if err != nil || len(shot) < 1000 || string(shot[1:4]) != "PNG" {
		t.Errorf("screenshot of the login page: %d bytes, %v; want a PNG", len(shot), err)
	} else if f, err := os.CreateTemp("", "palmgate-login-page-*.png"); err != nil {
		t.Errorf("saving the screenshot: %v", err)
	} else {
		_, werr := f.Write(shot)
		if cerr := f.Close(); werr != nil || cerr != nil {
			t.Errorf("saving the screenshot: %v %v", werr, cerr)
		}
		t.Logf("screenshot of the login page: %s", f.Name())
	}
	if got := cb.queries(); len(got) != 0 {
		t.Fatalf("the callback was called before the palm scan: %q", got)
	}

	// 3. The palm engine's assertion arrives over HTTP (no click); the page's
	// polling must take the browser to the relying party.
	subject := e.subject("browser-person")
	scanned := time.Now()
	resp2 := e.assert(t, page.ChallengeID, map[string]string{
		"assertion": at.sign(t, at.claims(e, challengeInfo{ChallengeID: page.ChallengeID, Nonce: page.Nonce}, subject)),
	}).ExpectStatus(t, http.StatusOK)
	if m := resp2.Object(t); str(m["status"]) != "verified" {
		t.Fatalf("assertion: %s, want status verified", resp2.Body)
	}
	select {
	case <-cb.hit:
	case <-time.After(browserWait):
		l, _ := chromedp.Run(step(5*time.Second), chromedp.Location())
		t.Fatalf("the browser did not reach the callback within %s of the palm scan; it is at %q", browserWait, l)
	}
	if err := chromedp.Do(step(10*time.Second), chromedp.WaitVisible(chromedp.ID("rp-done"))); err != nil {
		t.Fatalf("waiting for the callback page in the browser: %v", err)
	}
	final, err := chromedp.Run(step(5*time.Second), chromedp.Location())
	if err != nil || !strings.HasPrefix(final, rpServer.URL+"/callback?") {
		t.Errorf("browser location %q (%v), want the callback", final, err)
	}
	got := cb.queries()
	if len(got) != 1 {
		t.Fatalf("callback requests %q, want exactly one", got)
	}
	q := callbackQuery(t, rpServer.URL+"/callback?"+got[0], client.redirects[0])
	if q.Get("state") != state || q.Get("code") == "" || q.Get("iss") != e.URL+"/oauth2" || len(q) != 3 {
		t.Fatalf("callback query %v, want exactly a code, state %q and iss (RFC 9207)", q, state)
	}

	// 4. The code exchanges for tokens, once; the login page is answered.
	tok, err := rp.conf.Exchange(rp.ctx, q.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchanging the code the browser brought: %v", err)
	}
	expectTokenFields(t, tok, "openid orders:read", false)
	idt, _ := rp.verifyIDToken(t, tok, nonce, scanned)
	e.expectUserinfo(t, tok.AccessToken, idt.Subject)
	_, err = rp.conf.Exchange(rp.ctx, q.Get("code"), oauth2.VerifierOption(verifier))
	expectRetrieveError(t, err, http.StatusBadRequest, "invalid_grant")
	expectOAuthError(t, testserver.Do(t, "GET", e.verifyURL(id), nil), http.StatusBadRequest, "invalid_request")
}

// startChromium starts headless Chromium for t, with the flags this workplace
// needs (no background networking), and returns its context; it stops with the
// test, and Chromium's messages go to the test log if the test fails. Without
// Chromium the test skips, or fails with PALMGATE_REQUIRE_TOOLS=1.
func startChromium(t *testing.T) context.Context {
	t.Helper()
	chromium := tooltest.Chromium.Need(t) // skips, or fails with PALMGATE_REQUIRE_TOOLS=1
	var logMu sync.Mutex
	var browserLog []string
	logf := func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		browserLog = append(browserLog, fmt.Sprintf(format, args...))
	}
	t.Cleanup(func() {
		if t.Failed() {
			logMu.Lock()
			defer logMu.Unlock()
			t.Logf("chromedp log:\n%s", strings.Join(browserLog, "\n"))
		}
	})
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(900, 1200),
	)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithErrorf(logf), chromedp.WithLogf(logf))
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium %s: %v", chromium, err)
	}
	return ctx
}

// newChromium starts Chromium as startChromium does and returns a step function:
// a context of the browser bounded by d.
func newChromium(t *testing.T) func(d time.Duration) context.Context {
	t.Helper()
	ctx := startChromium(t)
	return func(d time.Duration) context.Context { return within(t, ctx, d) }
}

// within is the browser context tab (a tab of startChromium's browser) bounded
// by d, cancelled at the latest with t.
func within(t *testing.T, tab context.Context, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(tab, d)
	t.Cleanup(cancel)
	return c
}
