// Command zitadelrp is the zitadel/oidc v3 relying party of palmgate's integration
// tests (integration/rp_test.go), built from this module (its own go.mod, not
// palmgate's). It serves the same paths as the Node one (../openidclient/rp.mjs):
//
//	/login            the authorization redirect (PKCE, state)
//	/auth/callback    the code exchange; the page says "signed in as <sub>"
//	/refresh          rp.RefreshTokens, answers the new tokens as JSON
//	/userinfo         rp.Userinfo with the current access token, as JSON
//	/tokens           the current tokens as JSON
//	/logout           rp.EndSession (palmgate's end_session_endpoint, by POST from
//	                  here), then the redirect it answered
//	/logged-out       where palmgate sends the browser back (checks state)
//
// Environment: ISSUER, CLIENT_ID, CLIENT_SECRET, PORT. It prints its base URL on
// the first line of stdout.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"sync"

	"github.com/zitadel/oidc/v3/pkg/client/rp"
	httphelper "github.com/zitadel/oidc/v3/pkg/http"
	"github.com/zitadel/oidc/v3/pkg/oidc"
)

func random() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

type tokens struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	IDToken      string `json:"id_token"`
	Sub          string `json:"sub"`
}

func main() {
	ln, err := net.Listen("tcp", "127.0.0.1:"+os.Getenv("PORT"))
	if err != nil {
		log.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	ctx := context.Background()
	key := []byte(random())
	cookies := httphelper.NewCookieHandler(key, key, httphelper.WithUnsecure())
	provider, err := rp.NewRelyingPartyOIDC(ctx, os.Getenv("ISSUER"), os.Getenv("CLIENT_ID"), os.Getenv("CLIENT_SECRET"),
		base+"/auth/callback", []string{oidc.ScopeOpenID, oidc.ScopeOfflineAccess}, rp.WithPKCE(cookies),
		// zitadel verifies RS256 ID tokens only, unless told to take discovery's
		// id_token_signing_alg_values_supported (a client of palmgate may pick ES256
		// or EdDSA).
		rp.WithSigningAlgsFromDiscovery())
	if err != nil {
		log.Fatalf("discovery: %v", err)
	}

	var mu sync.Mutex
	var cur tokens
	var logoutState string
	answer := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	fail := func(w http.ResponseWriter, err error) {
		log.Print(err)
		answer(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
	}
	mux := http.NewServeMux()
	mux.Handle("/login", rp.AuthURLHandler(random, provider))
	mux.Handle("/auth/callback", rp.CodeExchangeHandler(func(w http.ResponseWriter, r *http.Request, t *oidc.Tokens[*oidc.IDTokenClaims], state string, _ rp.RelyingParty) {
		mu.Lock()
		cur = tokens{AccessToken: t.AccessToken, RefreshToken: t.RefreshToken, IDToken: t.IDToken, Sub: t.IDTokenClaims.GetSubject()}
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><title>RP</title><p id="rp-done">signed in as %s</p>`, t.IDTokenClaims.GetSubject())
	}, provider))
	mux.HandleFunc("/refresh", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		t, err := rp.RefreshTokens[*oidc.IDTokenClaims](r.Context(), provider, cur.RefreshToken, "", "")
		if err != nil {
			fail(w, err)
			return
		}
		cur.AccessToken, cur.RefreshToken, cur.IDToken = t.AccessToken, t.RefreshToken, t.IDToken
		if t.IDTokenClaims == nil || t.IDTokenClaims.GetSubject() != cur.Sub {
			fail(w, fmt.Errorf("refreshed ID token claims %+v, want sub %s", t.IDTokenClaims, cur.Sub))
			return
		}
		answer(w, http.StatusOK, cur)
	})
	mux.HandleFunc("/userinfo", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		info, err := rp.Userinfo[*oidc.UserInfo](r.Context(), cur.AccessToken, oidc.BearerToken, cur.Sub, provider)
		if err != nil {
			fail(w, err)
			return
		}
		answer(w, http.StatusOK, info)
	})
	mux.HandleFunc("/tokens", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		answer(w, http.StatusOK, cur)
	})
	mux.HandleFunc("/logout", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		logoutState = random()
		u, err := rp.EndSession(r.Context(), provider, cur.IDToken, base+"/logged-out", logoutState, "", nil)
		if err != nil {
			fail(w, err)
			return
		}
		if u == nil {
			fail(w, fmt.Errorf("the end_session_endpoint answered no redirect"))
			return
		}
		http.Redirect(w, r, u.String(), http.StatusFound)
	})
	mux.HandleFunc("/logged-out", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Query().Get("state") != logoutState {
			http.Error(w, "state mismatch", http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, `<!doctype html><title>RP</title><p id="rp-out">signed out</p>`)
	})
	fmt.Println(base)
	log.Fatal(http.Serve(ln, mux))
}
