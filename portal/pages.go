package portal

import (
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"strings"

	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/internal/brand"
)

//go:embed templates/*.html
var templateFiles embed.FS

var page = template.Must(template.New("portal.html").Funcs(template.FuncMap{
	"join": strings.Join,
	"algs": func() []string { return oidc.IDTokenAlgs },
	"auds": func() []string { return oidc.AccessTokenAudiences },
}).ParseFS(templateFiles, "templates/portal.html"))

// pageData fills the portal's one page template.
type pageData struct {
	Title    string
	Session  *session
	CSRF     string
	CSPNonce string
	Dev      bool
	Issuer   string // the OIDC issuer ({base}/oauth2)
	Discover string
	Apps     []*oidc.ClientInfo
	App      *oidc.ClientInfo
	// Secret is shown once, right after creation or rotation.
	Secret   string
	Message  string
	Error    string
	Snippets []snippet
	// Brand is the operator's brand (internal/brand), as on every page.
	Brand brand.Brand
}

type snippet struct {
	Title, Code string
}

func (p *Portal) render(w http.ResponseWriter, r *http.Request, status int, d *pageData) {
	d.CSPNonce = randomString(16)
	d.Dev = p.dev
	d.Issuer = p.issuer + "/oauth2"
	d.Discover = d.Issuer + "/.well-known/openid-configuration"
	d.Brand = p.brand
	imgSrc := ""
	if o := p.brand.ImgSrc(); o != "" {
		imgSrc = "; img-src " + o
	}
	if d.Session != nil {
		d.CSRF = p.csrfToken(d.Session)
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'"+imgSrc+"; style-src 'nonce-"+d.CSPNonce+"'; script-src 'nonce-"+d.CSPNonce+"'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	if err := page.Execute(w, d); err != nil {
		p.logger.Debug("writing portal page")
	}
}

// fail answers status with a page that says msg.
func (p *Portal) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	p.render(w, r, status, &pageData{Title: http.StatusText(status), Session: checkedSession(r), Error: msg})
}

func (p *Portal) showApp(w http.ResponseWriter, r *http.Request, s *session, ci *oidc.ClientInfo, secret, msg string) {
	p.render(w, r, http.StatusOK, &pageData{
		Title: ci.Name, Session: s, App: ci, Secret: secret, Message: msg, Snippets: p.snippets(ci),
	})
}

// snippets are the README's configurations filled in with the application's values.
func (p *Portal) snippets(ci *oidc.ClientInfo) []snippet {
	issuer := p.issuer + "/oauth2"
	redirect := ci.RedirectURIs[0]
	env := "PALMGATE_CLIENT_SECRET"
	return []snippet{
		{"Go (github.com/coreos/go-oidc/v3/oidc, golang.org/x/oauth2)", fmt.Sprintf(`provider, err := oidc.NewProvider(ctx, %q)
conf := oauth2.Config{
	ClientID: %q, ClientSecret: os.Getenv(%q),
	Endpoint: provider.Endpoint(), RedirectURL: %q,
	Scopes: []string{oidc.ScopeOpenID, oidc.ScopeOfflineAccess},
}
// login:    http.Redirect(w, r, conf.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), http.StatusFound)
// callback: tok, err := conf.Exchange(ctx, r.URL.Query().Get("code"), oauth2.VerifierOption(verifier))
idToken, err := provider.Verifier(&oidc.Config{ClientID: %q}).Verify(ctx, tok.Extra("id_token").(string))
// idToken.Subject is the user's pairwise id; check idToken.Nonce == nonce`, issuer, ci.ID, env, redirect, ci.ID)},
		{"Node (openid-client v5)", fmt.Sprintf(`const { Issuer, generators } = require('openid-client');
const issuer = await Issuer.discover('%s');
const client = new issuer.Client({ client_id: '%s', client_secret: process.env.%s,
  redirect_uris: ['%s'], response_types: ['code'] });
// login:    res.redirect(client.authorizationUrl({ scope: 'openid offline_access', state, nonce, code_challenge, code_challenge_method: 'S256' }));
// callback: const tokens = await client.callback('%s', client.callbackParams(req), { state, nonce, code_verifier });`,
			issuer, ci.ID, env, redirect, redirect)},
		{"Python (Authlib with Flask)", fmt.Sprintf(`oauth.register("palmgate", client_id=%q, client_secret=os.environ[%q],
               server_metadata_url=%q,
               client_kwargs={"scope": "openid offline_access", "code_challenge_method": "S256"})
# login:    return oauth.palmgate.authorize_redirect(%q)
# callback: token = oauth.palmgate.authorize_access_token(); sub = token["userinfo"]["sub"]`,
			ci.ID, env, issuer+"/.well-known/openid-configuration", redirect)},
		{"Caddyfile (protect an upstream, in the Caddy that runs palmgate)", `app.example.com {
	palmgate_bearer {
		scope openid
	}
	reverse_proxy 127.0.0.1:9000 {
		header_up X-User-Sub {http.auth.user.id}
	}
}`},
	}
}
