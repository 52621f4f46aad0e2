package integration

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/palmgate/palmgate/internal/testserver"
)

// rpSession is what a relying party keeps per user between login and callback.
type rpSession struct{ state, nonce, verifier string }

// readmeGoRP is the README's Go snippet (between the markers, one tab less),
// returned as the relying party's login and callback.
func readmeGoRP(ctx context.Context, issuer, redirectURL string) (func(*rpSession) string, func(context.Context, *rpSession, *http.Request) (*oidc.IDToken, *oauth2.Token, error), error) {
	// README:begin
	provider, err := oidc.NewProvider(ctx, issuer) // issuer: "https://id.example.com/oauth2"
	if err != nil {
		return nil, nil, err
	}
	conf := oauth2.Config{
		ClientID: "my-app", ClientSecret: os.Getenv("MY_APP_SECRET"),
		Endpoint: provider.Endpoint(), RedirectURL: redirectURL, // "https://app.example.com/auth/callback"
		Scopes: []string{oidc.ScopeOpenID, oidc.ScopeOfflineAccess},
	}
	verifier := provider.Verifier(&oidc.Config{ClientID: "my-app"})

	// login: keep state, nonce and the PKCE verifier in the user's session, redirect to the URL
	login := func(s *rpSession) string {
		s.state, s.nonce, s.verifier = rand.Text(), rand.Text(), oauth2.GenerateVerifier()
		return conf.AuthCodeURL(s.state, oidc.Nonce(s.nonce), oauth2.S256ChallengeOption(s.verifier))
	}
	// callback: r is the request the browser came back with (code, state, iss)
	callback := func(ctx context.Context, s *rpSession, r *http.Request) (*oidc.IDToken, *oauth2.Token, error) {
		if r.URL.Query().Get("state") != s.state {
			return nil, nil, errors.New("state mismatch")
		}
		tok, err := conf.Exchange(ctx, r.URL.Query().Get("code"), oauth2.VerifierOption(s.verifier))
		if err != nil {
			return nil, nil, err
		}
		rawID, _ := tok.Extra("id_token").(string)
		idToken, err := verifier.Verify(ctx, rawID)
		if err != nil || idToken.Nonce != s.nonce {
			return nil, nil, fmt.Errorf("ID token: %v", err)
		}
		return idToken, tok, nil // idToken.Subject is the user's pairwise id; tok.RefreshToken with offline_access
	}
	// README:end
	return login, callback, nil
}

// TestReadmeGoSnippet runs the README's Go snippet as a relying party, logging in
// through Chromium.
func TestReadmeGoSnippet(t *testing.T) {
	port := testserver.FreePort(t)
	c := rpClient(port)
	e := startOIDC(t, []oidcClient{c})
	t.Setenv("MY_APP_SECRET", c.secret) // the snippet reads it: this test is not parallel
	login, callback, err := readmeGoRP(context.Background(), e.URL+"/oauth2", c.redirects[0])
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	s := &rpSession{}
	var sub string
	var tok *oauth2.Token
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case "/login":
			http.Redirect(w, r, login(s), http.StatusFound)
		case "/auth/callback":
			idToken, t2, err := callback(r.Context(), s, r)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			sub, tok = idToken.Subject, t2
			fmt.Fprintf(w, `<!doctype html><title>RP</title><p id="rp-done">signed in as %s</p>`, sub)
		default:
			http.NotFound(w, r)
		}
	})}}
	srv.Start()
	t.Cleanup(srv.Close)
	ctx := startChromium(t)
	done := simulateLogin(t, ctx, srv.URL+"/login", e.subject("readme"), "#rp-done")
	mu.Lock()
	defer mu.Unlock()
	if !subRE.MatchString(sub) || done != "signed in as "+sub || tok.RefreshToken == "" {
		t.Fatalf("the snippet's relying party shows %q, sub %q, refresh token %q", done, sub, tok.RefreshToken)
	}
	e.expectUserinfo(t, tok.AccessToken, sub)
}

// snippet returns the lines between "README:begin" and "README:end" in file,
// without the indentation of the begin marker.
func snippet(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	begin := strings.Index(text, "README:begin\n")
	end := strings.Index(text, "README:end")
	if begin < 0 || end < begin {
		t.Fatalf("%s has no README:begin ... README:end block", file)
	}
	lineStart := strings.LastIndex(text[:begin], "\n") + 1
	indent := text[lineStart:begin]
	indent = indent[:len(indent)-len(strings.TrimLeft(indent, " \t"))]
	body := text[begin+len("README:begin\n") : end]
	body = body[:strings.LastIndex(body, "\n")+1] // up to the end marker's line
	var out strings.Builder
	for _, line := range strings.SplitAfter(body, "\n") {
		out.WriteString(strings.TrimPrefix(line, indent))
	}
	return out.String()
}

// TestReadmeSnippets: the README's Go and Node snippets are, word for word, the code
// TestReadmeGoSnippet and TestRelyingPartyOpenIDClient run.
func TestReadmeSnippets(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ lang, file string }{
		{"go", "readme_test.go"},
		{"js", "rp/openidclient/rp.mjs"},
	} {
		s := snippet(t, tc.file)
		if len(s) < 200 {
			t.Fatalf("%s: snippet of %d bytes: %q", tc.file, len(s), s)
		}
		if !strings.Contains(string(readme), "```"+tc.lang+"\n"+s+"```\n") && !strings.Contains(string(readme), "\n"+s+"```\n") {
			t.Errorf("README.md lacks the %s snippet of %s, which is:\n%s", tc.lang, tc.file, s)
		}
	}
}
