package caddymodule

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/edge"
)

// Protected resource metadata (RFC 9728) of palmgate_bearer (issue 23).
//
// The resource is the block's `resource` option, else the request's origin
// (scheme://host). Its document is at the resource's RFC 9728 3.1 URL
// (https://mcp.example/mcp: https://mcp.example/.well-known/oauth-protected-resource/mcp),
// which every 401 names in `resource_metadata`. It is served:
//   - by palmgate_bearer itself, for a GET of that path that reaches it (a block
//     placed where it sees it, such as at the site's top level);
//   - by the palmgate handler of any site of the same Caddy whose host is the
//     resource's, when the block names its `resource` and uses the local issuer:
//     the usual MCP layout has palmgate_bearer inside `handle /mcp*`, which
//     never sees /.well-known/..., and `palmgate` on the same site answers it.
//
// A block with `resource` refuses tokens whose aud does not hold it (as
// `audience` does), and in local mode its clients without a `resources` list
// may ask tokens for it.

// provisionResource checks the resource option, makes it the required audience
// and builds the document; issuer is the OIDC issuer identifier of the tokens.
func (b *Bearer) provisionResource(issuer string) error {
	b.authServer = issuer
	if b.Resource == "" {
		return nil
	}
	if _, ok := bearer.MetadataURL(b.Resource); !ok || !oidc.ValidResource(b.Resource) {
		return fmt.Errorf("palmgate_bearer resource: %q must be an http(s) URL without query or fragment", b.Resource)
	}
	switch {
	case b.Audience == "":
		b.Audience = b.Resource
	case b.Audience != b.Resource:
		return fmt.Errorf("palmgate_bearer: audience %q and resource %q differ; the resource is the audience (drop audience)", b.Audience, b.Resource)
	}
	md := bearer.NewResourceMetadata(b.Resource, issuer, b.Scopes)
	b.metadata = &md
	return nil
}

// resourceOf is the document of the resource a request reaches, and its URL.
func (b *Bearer) resourceOf(r *http.Request) (bearer.ResourceMetadata, string) {
	if b.metadata != nil {
		u, _ := bearer.MetadataURL(b.metadata.Resource)
		return *b.metadata, u
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	origin := scheme + "://" + r.Host
	return bearer.NewResourceMetadata(origin, b.authServer, b.Scopes), origin + bearer.WellKnownResource
}

// answerMetadata serves the resource's document when r asks for it, and
// reports whether it did.
func (b *Bearer) answerMetadata(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	if !strings.HasPrefix(r.URL.Path, bearer.WellKnownResource) {
		return false
	}
	md, mdURL := b.resourceOf(r)
	u, err := url.Parse(mdURL)
	if err != nil || strings.TrimSuffix(r.URL.EscapedPath(), "/") != u.EscapedPath() {
		return false
	}
	edge.WriteResourceMetadata(w, md)
	return true
}

// challengeMetadata adds resource_metadata, and the required scopes, to the
// Bearer challenge SetChallenge set on a 401, and (fourth review) on a 403
// insufficient_scope, from which an MCP client steps up (MCP 2025-11-25, scope
// challenge handling).
func (b *Bearer) challengeMetadata(h http.Header, r *http.Request, status int) {
	challenge := h.Get("WWW-Authenticate")
	stepUp := status == http.StatusForbidden && strings.Contains(challenge, `error="insufficient_scope"`)
	if status != http.StatusUnauthorized && !stepUp || !strings.HasPrefix(challenge, "Bearer ") {
		return
	}
	_, mdURL := b.resourceOf(r)
	challenge += `, resource_metadata="` + strings.ReplaceAll(mdURL, `"`, "%22") + `"`
	if len(b.Scopes) > 0 && !strings.Contains(challenge, ` scope="`) {
		challenge += `, scope="` + strings.Join(b.Scopes, " ") + `"`
	}
	h.Set("WWW-Authenticate", challenge)
}
