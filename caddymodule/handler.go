package caddymodule

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/palmgate/palmgate/edge"
)

func init() {
	caddy.RegisterModule(Handler{})
	httpcaddyfile.RegisterHandlerDirective("palmgate", parseHandler)
	// Before basic_auth: palmgate's public endpoints are never behind a site's own
	// authentication.
	httpcaddyfile.RegisterDirectiveOrder("palmgate", httpcaddyfile.Before, "basic_auth")
	// Then the bearer middleware (registered in bearer.go), so that a site serving
	// both never puts palmgate's own endpoints behind its tokens.
	httpcaddyfile.RegisterDirectiveOrder("palmgate_bearer", httpcaddyfile.Before, "basic_auth")
	// Then the demo relying party (caddymodule/demo, registered by its import in
	// accessors.go). RegisterDirectiveOrder only accepts an anchor from Caddy's
	// standard distribution (it panics on "palmgate"), so each is put before
	// basic_auth in turn, and lands after the ones before it.
	httpcaddyfile.RegisterDirectiveOrder("palmgate_demo", httpcaddyfile.Before, "basic_auth")
}

// Handler serves the palmgate identity service of the `palmgate` app: /oauth2/*,
// /v1/*, the developer portal /portal/* and the health probes /health/alive and
// /health/ready. Every other request goes to the next handler.
type Handler struct {
	app *App
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.palmgate",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision finds the palmgate app.
func (h *Handler) Provision(ctx caddy.Context) error {
	app, err := ctx.AppIfConfigured("palmgate")
	if errors.Is(err, caddy.ErrNotConfigured) {
		return errors.New("the palmgate directive needs the palmgate global option (at least its issuer)")
	}
	if err != nil {
		return err
	}
	h.app = app.(*App)
	return nil
}

// ServeHTTP serves palmgate's paths and passes the others on.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if !edge.OwnsPath(r.URL.Path) {
		return next.ServeHTTP(w, r)
	}
	h.app.Edge().ServeHTTP(w, r)
	return nil
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens:
//
//	palmgate
//
// It takes no arguments: the service is configured by the palmgate global option.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	if d.NextBlock(0) {
		return d.Err("the palmgate directive takes no block; configure the service in the palmgate global option")
	}
	return nil
}

func parseHandler(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	var handler Handler
	err := handler.UnmarshalCaddyfile(h.Dispenser)
	return &handler, err
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddyfile.Unmarshaler       = (*Handler)(nil)
)
