package edge

import (
	"net/http"
	"strings"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/fault"
)

// The /.well-known paths of OAuth and MCP clients (issue 23). palmgate's OIDC
// issuer is {issuer}/oauth2, so RFC 8414 3.1 puts its metadata at
// /.well-known/oauth-authorization-server/oauth2, and MCP clients also try the
// path-inserted OIDC form /.well-known/openid-configuration/oauth2: both are the
// discovery document. Protected resource metadata (RFC 9728) is served for the
// resources of this configuration's palmgate_bearer sites on this host.
//
// Every other path under these three prefixes is palmgate's too and answers 404
// (JSON): a client such as the MCP TypeScript SDK parses any 200 as metadata and
// goes on to its next candidate only after a 4xx, so Caddy's empty 200 (a site
// with nothing after palmgate) must never answer them. Other /.well-known paths
// (security.txt, ACME, app links) stay the site's.
const (
	PathASMetadata   = "/.well-known/oauth-authorization-server/oauth2"
	PathOIDCInserted = "/.well-known/openid-configuration/oauth2"
)

// wellKnownPrefixes are the /.well-known families OwnsPath claims.
var wellKnownPrefixes = []string{
	"/.well-known/oauth-authorization-server",
	"/.well-known/openid-configuration",
	bearer.WellKnownResource,
}

// ownsWellKnown reports whether p is in one of the claimed /.well-known families.
func ownsWellKnown(p string) bool {
	for _, prefix := range wellKnownPrefixes {
		if rest, ok := strings.CutPrefix(p, prefix); ok && (rest == "" || rest[0] == '/') {
			return true
		}
	}
	return false
}

// wellKnownRoutes adds the metadata routes; the mux's catch-all answers the rest
// of the claimed families with 404.
func (s *Server) wellKnownRoutes(route func(string, map[string]http.HandlerFunc)) {
	route(PathASMetadata, withOpenCORS(map[string]http.HandlerFunc{"GET": s.handleDiscovery}))
	route(PathOIDCInserted, withOpenCORS(map[string]http.HandlerFunc{"GET": s.handleDiscovery}))
	route(bearer.WellKnownResource, withOpenCORS(map[string]http.HandlerFunc{"GET": s.handleResourceMetadata}))
	route(bearer.WellKnownResource+"/{path...}", withOpenCORS(map[string]http.HandlerFunc{"GET": s.handleResourceMetadata}))
}

// handleResourceMetadata answers the RFC 9728 document of the resource whose
// metadata URL is this request's host and path, or 404.
func (s *Server) handleResourceMetadata(w http.ResponseWriter, r *http.Request) {
	md, ok := s.resources.Lookup(r.Host, r.URL.EscapedPath())
	if !ok {
		s.writeOAuthError(w, r, fault.New(fault.NotFound, codeNotFound, "no protected resource has its metadata here"))
		return
	}
	WriteResourceMetadata(w, md)
}

// WriteResourceMetadata writes an RFC 9728 document (palmgate_bearer serves it
// too), cacheable for five minutes.
func WriteResourceMetadata(w http.ResponseWriter, md bearer.ResourceMetadata) {
	w.Header().Set("Cache-Control", "public, max-age=300")
	writeJSON(w, http.StatusOK, md)
}
