// Command rp is the smallest relying party of palmgate: go-oidc and x/oauth2 in
// one file. The developer portal shows it filled in with an application's issuer,
// client_id and redirect URI; examples/rp in palmgate's repository is the same
// file with its flags to fill in. Save it as main.go in a new directory, then:
//
//	go mod init rp && go mod tidy
//	PALMGATE_CLIENT_SECRET=<the secret> go run .
//
// and open http://localhost:3000/.
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"html"
	"log"
	"net/http"
	"net/url"
	"os"
	"sync"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

func main() {
	issuer := flag.String("issuer", "http://localhost:8080/oauth2", "palmgate's OIDC issuer")
	clientID := flag.String("client-id", "", "the application's client_id (from the portal)")
	redirectURI := flag.String("redirect-uri", "http://localhost:3000/callback", "a redirect URI registered for the application")
	listen := flag.String("listen", "localhost:3000", "address to serve on")
	flag.Parse()
	secret := os.Getenv("PALMGATE_CLIENT_SECRET")
	if *clientID == "" || secret == "" {
		log.Fatal("give -client-id and the client secret in PALMGATE_CLIENT_SECRET")
	}
	callback, err := url.Parse(*redirectURI)
	if err != nil {
		log.Fatalf("-redirect-uri: %v", err)
	}
	ctx := context.Background()
	provider, err := oidc.NewProvider(ctx, *issuer)
	if err != nil {
		log.Fatalf("discovering %s: %v", *issuer, err)
	}
	conf := oauth2.Config{
		ClientID: *clientID, ClientSecret: secret,
		Endpoint: provider.Endpoint(), RedirectURL: *redirectURI,
		Scopes: []string{oidc.ScopeOpenID, oidc.ScopeOfflineAccess},
	}
	verifier := provider.Verifier(&oidc.Config{ClientID: *clientID})

	// One pending login per state, in memory: enough for an example.
	type pending struct{ nonce, pkce string }
	var mu sync.Mutex
	logins := map[string]pending{}

	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != callback.Path || !q.Has("state") {
			// login: remember state, nonce and the PKCE verifier, send the browser to palmgate
			state, p := rand.Text(), pending{nonce: rand.Text(), pkce: oauth2.GenerateVerifier()}
			mu.Lock()
			logins[state] = p
			mu.Unlock()
			http.Redirect(w, r, conf.AuthCodeURL(state, oidc.Nonce(p.nonce), oauth2.S256ChallengeOption(p.pkce)), http.StatusFound)
			return
		}
		// callback: the browser is back with code, state and iss (or an error)
		mu.Lock()
		p, ok := logins[q.Get("state")]
		delete(logins, q.Get("state"))
		mu.Unlock()
		switch {
		case !ok:
			http.Error(w, "unknown state: start again at /", http.StatusBadRequest)
			return
		case q.Has("error"):
			http.Error(w, "palmgate answered "+q.Get("error")+": "+q.Get("error_description"), http.StatusForbidden)
			return
		}
		tok, err := conf.Exchange(r.Context(), q.Get("code"), oauth2.VerifierOption(p.pkce))
		if err != nil {
			http.Error(w, "exchanging the code: "+err.Error(), http.StatusBadGateway)
			return
		}
		raw, _ := tok.Extra("id_token").(string)
		idToken, err := verifier.Verify(r.Context(), raw)
		if err != nil || idToken.Nonce != p.nonce {
			http.Error(w, fmt.Sprintf("verifying the ID token: %v", err), http.StatusBadGateway)
			return
		}
		// idToken.Subject is the user's pairwise id; tok.RefreshToken comes with offline_access
		fmt.Fprintf(w, `<!doctype html><title>Signed in</title><p id="signed-in">Signed in with palmgate as %s</p>`, html.EscapeString(idToken.Subject))
	})
	log.Printf("open http://%s/", *listen)
	log.Fatal(http.ListenAndServe(*listen, nil))
}
