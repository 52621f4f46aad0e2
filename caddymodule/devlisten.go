package caddymodule

import (
	"cmp"
	"net"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

// autoHTTPSRedirects is the server Caddy's automatic HTTPS adds to redirect
// http:// to https://: it serves no route of palmgate's, so what it listens on
// cannot expose dev mode.
const autoHTTPSRedirects = "remaining_auto_https_redirects"

// exposedListener is a listen address of an HTTP server that reaches beyond
// the loopback interface.
type exposedListener struct {
	Server, Listen string
}

// warnDevExposure logs a WARN line per listener of the http app that reaches
// beyond loopback, when dev mode is on: there, anyone on the network can
// simulate a palm scan and log in as anyone. It reads the http app's servers
// as configured (Start runs after every app was provisioned).
func (a *App) warnDevExposure() {
	if !a.Dev || a.ctx.Context == nil {
		return
	}
	httpApp, err := a.ctx.AppIfConfigured("http")
	if err != nil {
		return // no HTTP server: nothing listens
	}
	h, ok := httpApp.(*caddyhttp.App)
	if !ok {
		return
	}
	listens := map[string][]string{}
	for name, srv := range h.Servers {
		listens[name] = srv.Listen
	}
	for _, l := range exposedListeners(listens) {
		a.logger.Warn("palmgate dev mode on a listener beyond loopback: anyone who reaches it can simulate a palm scan and log in as anyone; "+
			"bind the site to loopback (the Caddyfile's `bind 127.0.0.1`, as `make run` does) or remove `dev`",
			zap.String("server", l.Server), zap.String("listen", l.Listen))
	}
}

// exposedListeners returns the listen addresses of servers (by name) that reach
// beyond loopback: an empty host (every interface), a wildcard address, an
// address of another interface or a host name other than localhost. Unix
// sockets and file descriptors reach no network.
func exposedListeners(servers map[string][]string) []exposedListener {
	repl := caddy.NewReplacer()
	var out []exposedListener
	for name, listen := range servers {
		if name == autoHTTPSRedirects {
			continue
		}
		for _, l := range listen {
			if beyondLoopback(repl.ReplaceKnown(l, "")) {
				out = append(out, exposedListener{Server: name, Listen: l})
			}
		}
	}
	// A stable order for the log.
	slices.SortFunc(out, func(x, y exposedListener) int {
		return cmp.Or(strings.Compare(x.Server, y.Server), strings.Compare(x.Listen, y.Listen))
	})
	return out
}

// beyondLoopback reports whether a listen address reaches beyond the loopback
// interface. An address it cannot parse counts as reaching beyond: a warning
// too many is better than a missing one.
func beyondLoopback(addr string) bool {
	na, err := caddy.ParseNetworkAddress(addr)
	if err != nil {
		return true
	}
	if na.IsUnixNetwork() || na.IsFdNetwork() {
		return false
	}
	host := strings.Trim(na.Host, "[]")
	if host == "" || strings.EqualFold(host, "localhost") {
		return host == ""
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}
