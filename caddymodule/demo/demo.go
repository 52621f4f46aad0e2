// Package demo is a demonstration OpenID Connect relying party for newcomers to
// palmgate: the `palmgate_demo` HTTP handler serves a tiny application under /demo
// that logs people in with their palm through the palmgate app of the same server,
// exactly as any Go application would (github.com/coreos/go-oidc and
// golang.org/x/oauth2), and shows what it learnt.
//
// It runs only when the palmgate app is in dev mode.
package demo

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/coreos/go-oidc/v3/oidc"
	"go.uber.org/zap"
	"golang.org/x/oauth2"
)

func init() {
	caddy.RegisterModule(Demo{})
	httpcaddyfile.RegisterHandlerDirective("palmgate_demo", parseCaddyfile)
	// Its place in the directive order is registered by caddymodule (handler.go),
	// which imports this package, after palmgate's own.
}

// Paths the demo serves; every other request goes to the next handler.
const (
	pathHome     = "/demo"
	pathLogin    = "/demo/login"
	pathCallback = "/demo/callback"
	pathLogout   = "/demo/logout"
)

// discoveryTimeout bounds each request the demo makes to palmgate.
const discoveryTimeout = 10 * time.Second

// Demo is a demonstration OpenID Connect relying party of the palmgate app of the
// same server, served under /demo: a landing page, the login redirect, the
// callback that exchanges the code and shows the pairwise subject and claims,
// and a logout. It refuses to run unless the palmgate app is in dev mode.
type Demo struct {
	// ClientID is the client_id of the palmgate client the demo logs in as. The
	// client's secret and its first redirect_uri (whose path must be
	// /demo/callback) are read from the palmgate app's configuration.
	ClientID string `json:"client_id,omitempty"`

	issuer     string // palmgate's base URL; the OIDC issuer is issuer + "/oauth2"
	clientName string
	origin     string // scheme://host of the redirect_uri, where the login cookie lives
	secure     bool   // the redirect_uri is https: the login cookie is Secure
	oauth      oauth2.Config
	client     *http.Client
	logger     *zap.Logger
	discovery  *discovery
}

// discovery holds palmgate's provider once the first request has fetched it.
type discovery struct {
	mu       sync.Mutex
	provider *oidc.Provider
	verifier *oidc.IDTokenVerifier
}

// CaddyModule returns the Caddy module information.
func (Demo) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.palmgate_demo",
		New: func() caddy.Module { return new(Demo) },
	}
}

// palmgateApp is what the demo needs of the palmgate app (caddymodule.App):
// asserted on the app, so that the demo does not import caddymodule, which
// imports the demo to register it.
type palmgateApp interface {
	DevMode() bool
	IssuerURL() string
	StaticClient(id string) (name, secret string, redirectURIs []string, ok bool)
}

// Provision finds the palmgate app, refuses to run outside dev mode, and reads the
// client's credentials. OpenID discovery waits for the first request: the server
// is not listening yet.
func (d *Demo) Provision(ctx caddy.Context) error {
	d.logger = ctx.Logger()
	if d.ClientID == "" {
		return errors.New("palmgate_demo: a client_id is required (`palmgate_demo <client_id>`)")
	}
	appModule, err := ctx.AppIfConfigured("palmgate")
	if err != nil {
		return fmt.Errorf("palmgate_demo needs the palmgate global option: %w", err)
	}
	app, ok := appModule.(palmgateApp)
	if !ok {
		return fmt.Errorf("palmgate_demo: the palmgate app is a %T, which lacks the accessors the demo needs", appModule)
	}
	if !app.DevMode() {
		return errors.New("palmgate_demo runs only in dev mode: add `dev` to the palmgate global option, or remove the palmgate_demo directive")
	}
	name, secret, redirects, found := app.StaticClient(d.ClientID)
	if !found {
		return fmt.Errorf("palmgate_demo: no client %q in the palmgate global option; add `client %s { secret ...; redirect_uri <origin>%s }`", d.ClientID, d.ClientID, pathCallback)
	}
	if secret == "" {
		return fmt.Errorf("palmgate_demo: client %s needs a clear `secret` (the demo is a client and must send it)", d.ClientID)
	}
	if len(redirects) == 0 {
		return fmt.Errorf("palmgate_demo: client %s has no redirect_uri", d.ClientID)
	}
	redirect, err := url.Parse(redirects[0])
	if err != nil || redirect.Host == "" || redirect.Path != pathCallback || redirect.RawQuery != "" {
		return fmt.Errorf("palmgate_demo: the first redirect_uri of client %s is %q; it must be <origin>%s, where the demo receives the login", d.ClientID, redirects[0], pathCallback)
	}
	d.issuer = strings.TrimSuffix(app.IssuerURL(), "/")
	d.clientName = name
	if d.clientName == "" {
		d.clientName = d.ClientID
	}
	d.origin = redirect.Scheme + "://" + redirect.Host
	d.secure = redirect.Scheme == "https"
	d.oauth = oauth2.Config{
		ClientID:     d.ClientID,
		ClientSecret: secret,
		RedirectURL:  redirect.String(),
		Scopes:       []string{oidc.ScopeOpenID, oidc.ScopeOfflineAccess},
	}
	d.client = &http.Client{Timeout: discoveryTimeout}
	d.discovery = new(discovery)
	return nil
}

// Validate checks what Provision read.
func (d *Demo) Validate() error {
	if d.oauth.ClientSecret == "" {
		return fmt.Errorf("palmgate_demo: client %s has no secret", d.ClientID)
	}
	if d.issuer == "" {
		return errors.New("palmgate_demo: the palmgate app has no issuer")
	}
	return nil
}

// ServeHTTP serves the demo's four paths and passes every other request on.
func (d *Demo) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	var handle http.HandlerFunc
	methods := []string{http.MethodGet, http.MethodHead}
	switch r.URL.Path {
	case pathHome:
		handle = d.serveHome
	case pathLogin:
		handle = d.serveLogin
	case pathCallback:
		handle = d.serveCallback
	case pathLogout:
		handle, methods = d.serveLogout, append(methods, http.MethodPost)
	default:
		return next.ServeHTTP(w, r)
	}
	if !slices.Contains(methods, r.Method) {
		allow := strings.Join(methods, ", ")
		w.Header().Set("Allow", allow)
		d.renderError(w, http.StatusMethodNotAllowed, "Method not allowed", r.Method+" is not allowed here; use "+allow+".")
		return nil
	}
	handle(w, r)
	return nil
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens:
//
//	palmgate_demo <client_id>
//
// The client's secret and redirect_uri come from the palmgate global option.
func (d *Demo) UnmarshalCaddyfile(disp *caddyfile.Dispenser) error {
	disp.Next() // directive name
	if !disp.NextArg() {
		return disp.Errf("palmgate_demo: the client_id is required (`palmgate_demo <client_id>`)")
	}
	d.ClientID = disp.Val()
	if disp.NextArg() {
		return disp.ArgErr()
	}
	if disp.NextBlock(0) {
		return disp.Err("palmgate_demo takes no block; configure the client in the palmgate global option")
	}
	return nil
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	var d Demo
	err := d.UnmarshalCaddyfile(h.Dispenser)
	return &d, err
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Demo)(nil)
	_ caddy.Validator             = (*Demo)(nil)
	_ caddyhttp.MiddlewareHandler = (*Demo)(nil)
	_ caddyfile.Unmarshaler       = (*Demo)(nil)
)
