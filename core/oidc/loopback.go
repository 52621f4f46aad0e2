package oidc

import (
	"net"
	"net/url"
)

// RFC 8252 7.3: a native app listens on a loopback IP address on a port the
// system gives it, which it cannot know when it registers: the authorization
// server must accept any port for a loopback IP redirect URI. palmgate does so
// for the clients that register themselves (RFC 7591, selfreg.go) or describe
// themselves (metadoc.go), the native apps MCP brings, and (fourth review) for
// every public client, the operator's and the portal's too: a native app is one.
// Confidential clients keep the exact match. Only the port may differ: the scheme
// (http), the IP literal (127.0.0.1 or [::1], not localhost, as the RFC says),
// the path and the query must be those of a registered URI. The token endpoint
// then requires the very URI the request used (exact), as for every client.

// allowsLoopbackPort reports whether uri is a registered loopback IP redirect URI
// of cl with another port.
func (cl *client) allowsLoopbackPort(uri string) bool {
	if !cl.loopbackAnyPort || CheckRedirectURI("redirect_uri", uri, false) != nil {
		return false
	}
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "http" || !loopbackIP(u.Hostname()) {
		return false
	}
	for _, registered := range cl.redirectURIs {
		r, err := url.Parse(registered)
		if err == nil && r.Scheme == "http" && r.Hostname() == u.Hostname() &&
			r.EscapedPath() == u.EscapedPath() && r.RawQuery == u.RawQuery {
			return true
		}
	}
	return false
}

func loopbackIP(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
