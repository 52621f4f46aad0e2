package demo

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"go.uber.org/zap"
	"golang.org/x/oauth2"
)

// discover returns palmgate's OpenID provider, fetching its discovery document on
// first use (the server is not listening at provision time). A failure is not
// remembered: the next request tries again.
func (d *Demo) discover(ctx context.Context) (*oidc.Provider, *oidc.IDTokenVerifier, error) {
	disc := d.discovery
	disc.mu.Lock()
	defer disc.mu.Unlock()
	if disc.provider != nil {
		return disc.provider, disc.verifier, nil
	}
	ctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, d.client), discoveryTimeout)
	defer cancel()
	issuer := d.issuer + "/oauth2"
	p, err := oidc.NewProvider(ctx, issuer)
	if err != nil {
		return nil, nil, fmt.Errorf("OpenID discovery at %s/.well-known/openid-configuration: %w", issuer, err)
	}
	// Pin RS256, the algorithm of the demo client's ID tokens (its block sets no
	// id_token_signed_response_alg); never trust the header.
	disc.provider = p
	disc.verifier = p.Verifier(&oidc.Config{ClientID: d.oauth.ClientID, SupportedSigningAlgs: []string{oidc.RS256}})
	return disc.provider, disc.verifier, nil
}

// config returns the OAuth configuration with the provider's endpoints.
func (d *Demo) config(p *oidc.Provider) *oauth2.Config {
	conf := d.oauth
	conf.Endpoint = p.Endpoint()
	conf.Endpoint.AuthStyle = oauth2.AuthStyleInHeader // client_secret_basic
	return &conf
}

// serveHome is the landing page.
func (d *Demo) serveHome(w http.ResponseWriter, r *http.Request) {
	d.render(w, http.StatusOK, page{
		Kind:       "home",
		ClientName: d.clientName,
		Issuer:     d.issuer,
		// On the redirect_uri's origin: the login cookie must come back with the callback.
		LoginURL: d.origin + pathLogin,
	})
}

// serveLogin starts a login: a fresh state, nonce and PKCE verifier in a signed
// cookie, and the redirect to palmgate's authorization endpoint.
func (d *Demo) serveLogin(w http.ResponseWriter, r *http.Request) {
	p, _, err := d.discover(r.Context())
	if err != nil {
		d.logger.Warn("palmgate_demo: discovery failed", zap.Error(err))
		d.renderError(w, http.StatusBadGateway, "palmgate is not reachable", err.Error())
		return
	}
	st := loginState{
		State:    rand.Text(),
		Nonce:    rand.Text(),
		Verifier: oauth2.GenerateVerifier(),
		Expires:  time.Now().Add(cookieTTL).Unix(),
	}
	value, err := sealState(cookieKey(), st)
	if err != nil {
		d.renderError(w, http.StatusInternalServerError, "Login failed", err.Error())
		return
	}
	http.SetCookie(w, d.loginCookie(value))
	w.Header().Set("Cache-Control", "no-store")
	target := d.config(p).AuthCodeURL(st.State, oidc.Nonce(st.Nonce), oauth2.S256ChallengeOption(st.Verifier))
	http.Redirect(w, r, target, http.StatusFound)
}

// serveLogout forgets any login in progress and goes back to the landing page.
// The demo keeps no session: what it learnt was shown once and not stored.
func (d *Demo) serveLogout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, d.loginCookie(""))
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, pathHome, http.StatusSeeOther)
}

// serveCallback finishes a login: it checks the state, exchanges the code with
// the PKCE verifier, verifies the ID token and its nonce, asks userinfo, and shows
// what the application learnt. The login cookie is used once.
func (d *Demo) serveCallback(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, d.loginCookie(""))
	cookie, err := r.Cookie(cookieName)
	if err != nil && r.URL.Query().Get("error") != "" {
		// palmgate's answer is an error: show it (the state cannot be checked
		// without the cookie, but an error gives nothing away).
		d.renderError(w, http.StatusBadRequest, "Login failed", receivedError(r.URL.Query())+
			" This browser has no login in progress here: it may have been started elsewhere, or have expired.")
		return
	}
	if err != nil {
		d.renderError(w, http.StatusBadRequest, "No login in progress",
			"This browser has no login in progress: it never started one at "+d.origin+pathLogin+", or the callback came back to another origin, or the login was already finished.")
		return
	}
	st, err := openState(cookieKey(), cookie.Value, time.Now())
	if err != nil {
		msg := "The login cookie is not valid: " + err.Error() + "."
		if errors.Is(err, errExpiredCookie) {
			msg = "The login took more than " + cookieTTL.String() + ". Start again."
		}
		d.renderError(w, http.StatusBadRequest, "Login expired", msg)
		return
	}
	code, failure := checkCallback(r.URL.Query(), st)
	if failure != nil {
		d.renderError(w, failure.Status, failure.Title, failure.Message)
		return
	}
	result, err := d.finishLogin(r.Context(), code, st)
	if err != nil {
		d.logger.Warn("palmgate_demo: login failed", zap.Error(err))
		d.renderError(w, http.StatusBadGateway, "Login failed", err.Error())
		return
	}
	d.render(w, http.StatusOK, *result)
}

// finishLogin does what any relying party does with an authorization code.
func (d *Demo) finishLogin(ctx context.Context, code string, st loginState) (*page, error) {
	p, verifier, err := d.discover(ctx)
	if err != nil {
		return nil, err
	}
	ctx = oidc.ClientContext(ctx, d.client)
	tok, err := d.config(p).Exchange(ctx, code, oauth2.VerifierOption(st.Verifier))
	if err != nil {
		return nil, fmt.Errorf("exchanging the code at the token endpoint: %w", err)
	}
	rawIDToken, _ := tok.Extra("id_token").(string)
	if rawIDToken == "" {
		return nil, errors.New("the token response has no id_token")
	}
	idToken, err := verifier.Verify(ctx, rawIDToken)
	if err != nil {
		return nil, fmt.Errorf("verifying the ID token: %w", err)
	}
	if idToken.Nonce != st.Nonce {
		return nil, errors.New("the ID token's nonce is not the one this login sent")
	}
	if idToken.AccessTokenHash != "" {
		if err := idToken.VerifyAccessToken(tok.AccessToken); err != nil {
			return nil, fmt.Errorf("checking the ID token's at_hash: %w", err)
		}
	}
	var idClaims map[string]any
	if err := idToken.Claims(&idClaims); err != nil {
		return nil, fmt.Errorf("decoding the ID token's claims: %w", err)
	}
	info, err := p.UserInfo(ctx, oauth2.StaticTokenSource(tok))
	if err != nil {
		return nil, fmt.Errorf("calling userinfo: %w", err)
	}
	if info.Subject != idToken.Subject {
		return nil, errors.New("userinfo's sub differs from the ID token's") // OIDC Core 5.3.2
	}
	var infoClaims map[string]any
	if err := info.Claims(&infoClaims); err != nil {
		return nil, fmt.Errorf("decoding the userinfo answer: %w", err)
	}
	return &page{
		Kind:       "result",
		ClientName: d.clientName,
		Issuer:     d.issuer,
		LoginURL:   d.origin + pathLogin,
		Sub:        idToken.Subject,
		IDClaims:   prettyJSON(idClaims),
		UserInfo:   prettyJSON(infoClaims),
		Access:     describeToken(tok, time.Now()),
	}, nil
}

// tokenFacts describes the tokens of a token response without their values.
type tokenFacts struct {
	Type         string
	Scopes       []string
	Expiry       string // RFC 3339 UTC
	ExpiresIn    string // from now, rounded to the second
	Refresh      bool   // a refresh token was issued (scope offline_access)
	RefreshUntil string // its expiry, when palmgate says it
}

// describeToken reads the facts of tok at now; it never copies a token value.
func describeToken(tok *oauth2.Token, now time.Time) tokenFacts {
	f := tokenFacts{Type: tok.Type(), Refresh: tok.RefreshToken != ""}
	if scope, _ := tok.Extra("scope").(string); scope != "" {
		f.Scopes = strings.Fields(scope)
	}
	if !tok.Expiry.IsZero() {
		f.Expiry = tok.Expiry.UTC().Format(time.RFC3339)
		f.ExpiresIn = tok.Expiry.Sub(now).Round(time.Second).String()
	}
	if secs, ok := tok.Extra("refresh_token_expires_in").(float64); ok && secs > 0 && f.Refresh {
		f.RefreshUntil = now.Add(time.Duration(secs) * time.Second).UTC().Format(time.RFC3339)
	}
	return f
}

// prettyJSON indents a decoded JSON value for display.
func prettyJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprintf("(not JSON: %v)", err)
	}
	return string(b)
}
