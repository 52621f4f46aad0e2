package portal

import (
	"bytes"
	"embed"
	"encoding/json"
	"net"
	"net/url"
	"strconv"
	"text/template"

	"github.com/palmgate/palmgate/core/oidc"
)

// The snippets are whole programs, filled in with an application's values: each
// runs as pasted (integration's TestPortalSnippets runs them as the page shows
// them), and the Go one is examples/rp (TestGoSnippetIsExamplesRP).
//
//go:embed snippets/*.tmpl
var snippetFiles embed.FS

var snippetTemplates = template.Must(template.New("").Funcs(template.FuncMap{
	// literal quotes s as a JavaScript (and Python) string literal.
	"literal": func(s string) string {
		b, _ := json.Marshal(s)
		return string(b)
	},
}).ParseFS(snippetFiles, "snippets/*.tmpl"))

// snippet is one configuration on an application's page.
type snippet struct {
	// ID names its element ("snippet-go") and its figure.
	ID, Title string
	// File is what to save it as, and Run how to start it ("" for none).
	File, Run string
	Code      string
}

// snippetValues fill the templates.
type snippetValues struct {
	Issuer, Discovery, ClientID, RedirectURI string
	// Listen is where the program serves: the redirect URI's host and port when it
	// is http, else localhost:3000 (behind the developer's https proxy).
	Listen, ListenHost string
	ListenPort         int
	// Public is a client without a secret; Insecure an http issuer (dev mode);
	// Proxied a redirect URI that is not http (the program serves it behind a proxy).
	Public, Insecure, Proxied bool
}

// newSnippetValues are the values of an application whose redirect URI is redirect.
func newSnippetValues(issuer, clientID, redirect string, public bool) snippetValues {
	v := snippetValues{
		Issuer: issuer, Discovery: issuer + "/.well-known/openid-configuration", ClientID: clientID, RedirectURI: redirect,
		ListenHost: "localhost", ListenPort: 3000, Public: public, Proxied: true,
	}
	if u, err := url.Parse(issuer); err == nil && u.Scheme == "http" {
		v.Insecure = true
	}
	if u, err := url.Parse(redirect); err == nil && u.Scheme == "http" {
		port := 80
		if p, err := strconv.Atoi(u.Port()); err == nil {
			port = p
		}
		v.ListenHost, v.ListenPort, v.Proxied = u.Hostname(), port, false
	}
	v.Listen = net.JoinHostPort(v.ListenHost, strconv.Itoa(v.ListenPort))
	return v
}

// render fills the template name in.
func (v snippetValues) render(name string) string {
	var b bytes.Buffer
	if err := snippetTemplates.ExecuteTemplate(&b, name, v); err != nil {
		return "" // the templates are tested with every kind of value
	}
	return b.String()
}

// snippets are the application's ready-to-run configurations.
//
// The programs are web servers: they take the first http(s) redirect URI. An
// application with only a native app's private-use scheme URIs (RFC 8252 7.1)
// gets none of them (no web server can receive com.example.app:/cb), only the
// Caddyfile (pageData.NativeOnly).
func (p *Portal) snippets(ci *oidc.ClientInfo) []snippet {
	caddyfile := snippet{ID: "caddyfile", Title: "Caddyfile: protect an upstream, in the Caddy that runs palmgate", Code: `app.example.com {
	palmgate_bearer {
		scope openid
	}
	reverse_proxy 127.0.0.1:9000 {
		header_up X-User-Sub {http.auth.user.id}
	}
}`}
	redirect := webRedirect(ci)
	if redirect == "" {
		return []snippet{caddyfile}
	}
	v := newSnippetValues(p.issuer+"/oauth2", ci.ID, redirect, ci.TokenEndpointAuthMethod == "none")
	secret := "PALMGATE_CLIENT_SECRET=<the secret> "
	if v.Public {
		secret = ""
	}
	return []snippet{
		{ID: "go", Title: "Go: go-oidc and x/oauth2", File: "main.go",
			Run: "go mod init rp && go mod tidy && " + secret + "go run .", Code: v.render("rp.go.tmpl")},
		{ID: "node", Title: "Node: openid-client v6", File: "rp.mjs",
			Run: "npm install openid-client@6 && " + secret + "node rp.mjs", Code: v.render("rp.mjs.tmpl")},
		{ID: "python", Title: "Python: Authlib with Flask", File: "app.py",
			Run: "pip install Authlib Flask requests && " + secret + "python3 app.py", Code: v.render("rp.py.tmpl")},
		caddyfile,
	}
}

// webRedirect is the application's first http(s) redirect URI, "" when all are
// a native app's private-use scheme ones.
func webRedirect(ci *oidc.ClientInfo) string {
	for _, u := range ci.RedirectURIs {
		if !oidc.PrivateUseRedirect(u) {
			return u
		}
	}
	return ""
}
