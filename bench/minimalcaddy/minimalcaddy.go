// Package minimalcaddy serves the minimal server's verify/signature handler
// (bench/minimal, no palmgate code) as a Caddy HTTP handler: the load script's
// scenario minimal-caddy, the baseline of issue 19's goal 1 in Caddy. Through the
// same Caddy and the same request as palmgate's verify-reg, the ratio of the
// two is what palmgate's handler costs against the minimal one's; against
// minimal-proc (the same handler with no Caddy), what Caddy itself costs it.
//
// It also answers POST /oauth2/token with the three signatures of a code
// exchange and nothing else (token.go; scenarios token-caddy and
// token-caddy-rs): against goal 3's baseline (the same signatures alone), what
// HTTP, Caddy and the load generator cost an exchange; against palmgate's
// exchange, what palmgate's token endpoint costs beyond them. The signatures
// are core/keys' (bench/exchangesig), since they are the baseline.
//
// It is registered only in the bench's own binary (cmd/caddy-minimal), never in
// palmgate's build of Caddy:
//
//	{
//		admin 127.0.0.1:2019
//		persist_config off
//	}
//	http://127.0.0.1:8080 {
//		minimal_verify
//	}
package minimalcaddy

import (
	"context"
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/palmgate/palmgate/bench/exchangesig"
	"github.com/palmgate/palmgate/bench/minimal"
	"github.com/palmgate/palmgate/storage/memstore"
)

func init() {
	caddy.RegisterModule(Handler{})
	httpcaddyfile.RegisterHandlerDirective("minimal_verify", parseHandler)
	// Where palmgate's own directive goes: the same place in the site's route.
	httpcaddyfile.RegisterDirectiveOrder("minimal_verify", httpcaddyfile.Before, "basic_auth")
}

// Handler serves POST /v1/agent/verify/signature with the minimal server's
// handler, as palmgate's handler does its paths, and passes every other
// request to the next handler.
type Handler struct {
	mux    http.Handler
	signer *exchangesig.Signer
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.minimal_verify",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision makes the minimal server's handler (the same http.ServeMux as the
// minimal server's, so the same routing work as well) and the token answer's
// signing keys, in memory.
func (h *Handler) Provision(caddy.Context) error {
	h.mux = minimal.Handler()
	signer, err := exchangesig.New(context.Background(), memstore.New(), Issuer)
	if err != nil {
		return fmt.Errorf("minimal_verify: signing keys: %w", err)
	}
	h.signer = signer
	return nil
}

// ServeHTTP serves the signature check and the token request and passes the
// other paths on.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	switch {
	case r.URL.Path == minimal.VerifyPath:
		h.mux.ServeHTTP(w, r)
	case r.URL.Path == TokenPath && r.Method == http.MethodPost:
		h.token(w, r)
	default:
		return next.ServeHTTP(w, r)
	}
	return nil
}

// UnmarshalCaddyfile sets up the handler from the directive `minimal_verify`,
// which takes no arguments and no block.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	if d.NextBlock(0) {
		return d.Err("minimal_verify takes no block")
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
