package oidc

import (
	"net/url"
	"slices"
	"strings"
)

// ErrInvalidTarget refuses a `resource` the client may not ask for (RFC 8707 2).
const ErrInvalidTarget = "invalid_target"

// DefaultScopes are what a client may ask for when its configuration lists none.
var DefaultScopes = []string{ScopeOpenID, ScopeOfflineAccess}

// maxResourceLen bounds a `resource` parameter.
const maxResourceLen = 2048

// ValidScope reports whether sc is a scope token palmgate accepts (RFC 6749 3.3,
// at most 64 characters).
func ValidScope(sc string) bool { return len(sc) <= maxScopeLen && scopeToken.MatchString(sc) }

// ValidResource reports whether uri can be an RFC 8707 resource indicator: an
// absolute URI without a fragment.
func ValidResource(uri string) bool {
	if uri == "" || len(uri) > maxResourceLen || strings.Contains(uri, "#") {
		return false
	}
	u, err := url.Parse(uri)
	return err == nil && u.IsAbs() && (u.Host != "" || u.Opaque != "")
}

// resourcesOf are the resources cl may ask tokens for: its own `resources` list,
// or, for a client without one (a public or self-registered client, such as an
// MCP client), the resources this palmgate's bearer sites protect and the
// operator's `resources` list (issue 23).
func (s *Service) resourcesOf(cl *client) []string {
	if len(cl.resources) > 0 {
		return cl.resources
	}
	return s.resources.URIs()
}

// permits checks what an authorization request asks of client cl: every scope
// must be one the client may ask for (mayAskFor, else invalid_scope), and at most
// one resource, one of the client's (resourcesOf, else invalid_target). It
// returns the resource, "" when none is asked.
func (s *Service) permits(cl *client, scopes, resources []string) (string, error) {
	res, resErr := resource(resources, s.resourcesOf(cl))
	for _, sc := range scopes {
		if !s.mayAskFor(cl, res, sc) {
			return "", oauthError(ErrInvalidScope, "scope %.64q is not allowed for this client", sc)
		}
	}
	return res, resErr
}

// mayAskFor reports whether cl may ask for scope sc in a grant for resource res:
// a scope of its own or a standard one (mayAsk), or (fourth review) for a client
// without its own `resources` list, one the palmgate_bearer site protecting res
// lists (its `scope`, published as the document's scopes_supported and in its
// 401): a stock MCP client asks for exactly those, and the token holding them is
// for that resource alone.
func (s *Service) mayAskFor(cl *client, res, sc string) bool {
	if cl.mayAsk(sc) {
		return true
	}
	return res != "" && len(cl.resources) == 0 && slices.Contains(s.resources.ScopesOf(res), sc)
}

// resource checks the `resource` parameters of a request: none, or one absolute URI
// of allowed. palmgate issues one audience per grant, so a second `resource` is
// refused rather than merged.
func resource(resources, allowed []string) (string, error) {
	switch {
	case len(resources) == 0:
		return "", nil
	case len(resources) > 1:
		return "", oauthError(ErrInvalidTarget, "at most one resource per request")
	case !ValidResource(resources[0]):
		return "", oauthError(ErrInvalidTarget, "resource must be an absolute URI without a fragment")
	}
	if i := slices.IndexFunc(allowed, func(a string) bool { return sameResource(a, resources[0]) }); i >= 0 {
		return allowed[i], nil // the configured spelling: the aud the bearer site compares
	}
	return "", oauthError(ErrInvalidTarget, "resource %.200q is not allowed for this client", resources[0])
}

// sameResource reports whether a and b name one resource: equal, or equal once
// scheme and host are lower case, a default port is dropped and an empty path is
// "/" (RFC 3986 6.2.2.1, 6.2.3), the forms `new URL(...).href` writes (MCP
// TypeScript SDK releases before its issue 1968 was fixed send the resource so:
// https://mcp.example becomes https://mcp.example/). Nothing else is normalised: another path, query or
// port is another resource.
func sameResource(a, b string) bool {
	if a == b {
		return true
	}
	na, ok := normalResource(a)
	if !ok {
		return false
	}
	nb, ok := normalResource(b)
	return ok && na == nb
}

// normalResource is the normal form of an http(s) resource URI, for sameResource.
func normalResource(uri string) (string, bool) {
	u, err := url.Parse(uri)
	if err != nil || u.Opaque != "" || u.Host == "" || u.User != nil || u.Fragment != "" {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Host)
	switch scheme {
	case "https":
		host = strings.TrimSuffix(host, ":443")
	case "http":
		host = strings.TrimSuffix(host, ":80")
	default:
		return "", false
	}
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	q := ""
	if u.ForceQuery || u.RawQuery != "" {
		q = "?" + u.RawQuery
	}
	return scheme + "://" + host + p + q, true
}

// checkGranted checks a token request of client cl against its grant: the client
// must still be allowed the grant's scopes and resource (a configuration may have
// narrowed since), and an asked `resource` must be the one granted.
func (s *Service) checkGranted(cl *client, g *grant, asked []string) error {
	allowed := s.resourcesOf(cl)
	for _, sc := range g.Scopes {
		if !s.mayAskFor(cl, g.Resource, sc) {
			return oauthError(ErrInvalidScope, "scope %.64q is no longer allowed for this client", sc)
		}
	}
	if g.Resource != "" && !slices.ContainsFunc(allowed, func(a string) bool { return sameResource(a, g.Resource) }) {
		return oauthError(ErrInvalidTarget, "resource %.200q is no longer allowed for this client", g.Resource)
	}
	switch {
	case len(asked) == 0:
		return nil
	case len(asked) > 1:
		return oauthError(ErrInvalidTarget, "at most one resource per request")
	case g.Resource == "":
		return oauthError(ErrInvalidTarget, "no resource was granted; ask for it in the authorization request")
	case !sameResource(asked[0], g.Resource):
		return oauthError(ErrInvalidTarget, "resource %.200q was not granted", asked[0])
	}
	return nil
}

// parseScopes parses the scope of an authorization request. A request for a
// resource (RFC 8707) is an OAuth request, not necessarily an OpenID one: an MCP
// client asks for a token for its server and may leave openid out (it then gets
// an access token and no ID token). Without a resource, openid is required.
func parseScopes(raw string, forResource bool) ([]string, error) {
	scopes, err := parseScopeList(raw)
	if err != nil {
		return nil, err
	}
	if !forResource && !slices.Contains(scopes, ScopeOpenID) {
		return nil, oauthError(ErrInvalidScope, "scope must include openid (or the request must name a resource)")
	}
	return scopes, nil
}

// parseScopeList parses a `scope` parameter into sorted, distinct, valid scope
// tokens, openid or not (a refresh may narrow to scopes without it, RFC 6749 6).
func parseScopeList(raw string) ([]string, error) {
	scopes := strings.Fields(raw)
	if len(scopes) > maxScopes {
		return nil, oauthError(ErrInvalidScope, "at most %d scopes", maxScopes)
	}
	for _, sc := range scopes {
		if len(sc) > maxScopeLen || !scopeToken.MatchString(sc) {
			return nil, oauthError(ErrInvalidScope, "scope %.64q is not a valid scope token", sc)
		}
	}
	slices.Sort(scopes)
	return slices.Compact(scopes), nil
}
