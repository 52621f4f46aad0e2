package bearer

import (
	"net/url"
	"slices"
	"strings"
	"sync"
)

// WellKnownResource is the well-known path of RFC 9728 protected resource metadata.
const WellKnownResource = "/.well-known/oauth-protected-resource"

// ResourceMetadata is an RFC 9728 protected resource metadata document: the
// resource, the authorization server that issues its tokens, the scopes it
// understands and how a token is sent (in the Authorization header only).
type ResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
}

// NewResourceMetadata is the document of resource, whose tokens issuer (an OIDC
// issuer identifier) signs, requiring scopes.
func NewResourceMetadata(resource, issuer string, scopes []string) ResourceMetadata {
	return ResourceMetadata{
		Resource: resource, AuthorizationServers: []string{issuer},
		ScopesSupported: slices.Clone(scopes), BearerMethodsSupported: []string{"header"},
	}
}

// MetadataURL is where the metadata of resource is served (RFC 9728 3.1): the
// well-known path inserted between the resource's host and its path, without the
// path's trailing slash (https://mcp.example/mcp has
// https://mcp.example/.well-known/oauth-protected-resource/mcp). It reports false
// for a resource that is not an absolute http(s) URL without query or fragment.
func MetadataURL(resource string) (string, bool) {
	u, err := url.Parse(resource)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", false
	}
	return u.Scheme + "://" + u.Host + WellKnownResource + strings.TrimSuffix(u.EscapedPath(), "/"), true
}

// Resources are the resources the bearer middlewares of one configuration protect
// (their documents, by the host and path of their metadata URL) and the further
// resources the operator lists: the resources palmgate issues tokens for to a
// client that lists none of its own. Safe for concurrent use.
type Resources struct {
	mu     sync.RWMutex
	docs   map[string]ResourceMetadata // host (lower case) + metadata path
	listed []string
}

// Allow adds resource indicators that have no document here (the operator's list).
func (r *Resources) Allow(uris ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.listed = append(r.listed, uris...)
}

// Add records the document of a protected resource; md.Resource must have a
// MetadataURL.
func (r *Resources) Add(md ResourceMetadata) {
	mdURL, ok := MetadataURL(md.Resource)
	if !ok {
		return
	}
	u, _ := url.Parse(mdURL)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.docs == nil {
		r.docs = make(map[string]ResourceMetadata)
	}
	r.docs[strings.ToLower(u.Host)+u.EscapedPath()] = md
}

// Lookup returns the document served at host and path (a request's), if any.
func (r *Resources) Lookup(host, path string) (ResourceMetadata, bool) {
	if r == nil {
		return ResourceMetadata{}, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	md, ok := r.docs[strings.ToLower(host)+strings.TrimSuffix(path, "/")]
	return md, ok
}

// ScopesOf are the scopes the document of resource lists (scopes_supported), none
// for a resource without a document here.
func (r *Resources) ScopesOf(resource string) []string {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, md := range r.docs {
		if md.Resource == resource {
			return slices.Clone(md.ScopesSupported)
		}
	}
	return nil
}

// URIs are every resource: those with a document and the listed ones.
func (r *Resources) URIs() []string {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := slices.Clone(r.listed)
	for _, md := range r.docs {
		out = append(out, md.Resource)
	}
	return out
}
