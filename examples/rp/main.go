// Command rp is the smallest relying party of palmgate: the README's Go snippet
// (go-oidc and x/oauth2) as a program. Register an application in the developer
// portal with the redirect URI http://localhost:3000/callback, then:
//
//	PALMGATE_CLIENT_SECRET=<secret> go run ./examples/rp -client-id <client_id>
//
// and open http://localhost:3000/.
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"sync"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

func random() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func main() {
	issuer := flag.String("issuer", "http://localhost:8080/oauth2", "palmgate's OIDC issuer")
	clientID := flag.String("client-id", "", "the application's client_id (from the portal)")
	listen := flag.String("listen", "localhost:3000", "address to serve on")
	flag.Parse()
	if *clientID == "" || os.Getenv("PALMGATE_CLIENT_SECRET") == "" {
		log.Fatal("give -client-id and the secret in PALMGATE_CLIENT_SECRET")
	}
	ctx := context.Background()
	provider, err := oidc.NewProvider(ctx, *issuer)
	if err != nil {
		log.Fatalf("discovering %s: %v", *issuer, err)
	}
	conf := oauth2.Config{
		ClientID: *clientID, ClientSecret: os.Getenv("PALMGATE_CLIENT_SECRET"),
		Endpoint: provider.Endpoint(), RedirectURL: "http://" + *listen + "/callback",
		Scopes: []string{oidc.ScopeOpenID, oidc.ScopeOfflineAccess},
	}
	verifier := provider.Verifier(&oidc.Config{ClientID: *clientID})

	// One pending login per state, in memory: enough for an example.
	type pending struct{ nonce, pkce string }
	var mu sync.Mutex
	logins := map[string]pending{}

	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		state, p := random(), pending{nonce: random(), pkce: oauth2.GenerateVerifier()}
		mu.Lock()
		logins[state] = p
		mu.Unlock()
		http.Redirect(w, r, conf.AuthCodeURL(state, oidc.Nonce(p.nonce), oauth2.S256ChallengeOption(p.pkce)), http.StatusFound)
	})
	http.HandleFunc("/callback", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		p, ok := logins[r.URL.Query().Get("state")]
		delete(logins, r.URL.Query().Get("state"))
		mu.Unlock()
		if !ok {
			http.Error(w, "unknown state: start again at /", http.StatusBadRequest)
			return
		}
		tok, err := conf.Exchange(r.Context(), r.URL.Query().Get("code"), oauth2.VerifierOption(p.pkce))
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
		fmt.Fprintf(w, "Logged in with palmgate. Your pairwise sub: %s\n", idToken.Subject)
	})
	log.Printf("open http://%s/", *listen)
	log.Fatal(http.ListenAndServe(*listen, nil))
}
