package oidc

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"strings"

	"github.com/palmgate/palmgate/core/fault"
)

// Client ID metadata documents (draft-ietf-oauth-client-id-metadata-document):
// a client_id that is an https URL names a JSON document, at that URL, that
// describes the client. The fetching (https only, the SSRF defences, the size and
// time limits, the cache) is the MetadataFetcher's, at the edge; this file
// validates what it fetched, every time it is used (the fetcher caches):
//
//   - the document is a JSON object whose client_id is exactly the URL;
//   - its redirect_uris are the client's only ones, checked as a portal client's
//     (validateSpec), and its client_name (optional: the URL's host without) by
//     the portal's name rules;
//   - it is a public client (token_endpoint_auth_method none, or absent): the
//     draft forbids shared secrets, and palmgate verifies no client keys;
//   - its grant_types, if any, are its only grants (authorization_code among
//     them, refresh_token and jwt-bearer as it lists them); its response_types,
//     if any, are code.
//
// Such a client is self-registered on the consent screen, with the host of its
// URL (MetadataNotice); its pairwise subjects are its own (sector: the URL).

// MetadataFetcher fetches the client ID metadata document at clientID (an https
// URL): its bytes, or an error that says why not (its text is shown to the
// client's developer).
type MetadataFetcher interface {
	Fetch(ctx context.Context, clientID string) ([]byte, error)
}

// MaxMetadataClientIDLen bounds a client_id that is a URL.
const MaxMetadataClientIDLen = 2000

// IsMetadataClientID reports whether id has the form of a client ID metadata
// document's URL (https://...); whether it is a valid one is metadataClient's.
func IsMetadataClientID(id string) bool { return strings.HasPrefix(id, "https://") }

// MetadataNotice is the words beside the name of a client described by a metadata
// document at host.
func MetadataNotice(host string) string {
	return "described by " + host + ", not registered by the operator"
}

// metadataDocument is what palmgate reads of a client ID metadata document.
type metadataDocument struct {
	ClientID                string   `json:"client_id"`
	ClientName              string   `json:"client_name"`
	RedirectURIs            []string `json:"redirect_uris"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	ClientSecret            *string  `json:"client_secret"`
	PostLogoutRedirectURIs  []string `json:"post_logout_redirect_uris"`
	// BackchannelLogoutURI: as a self-registered client's (selfreg.go).
	BackchannelLogoutURI string `json:"backchannel_logout_uri"`
}

// metaErr is the refusal of a metadata client: invalid_request (the client_id
// is then no client palmgate can serve), with why.
func metaErr(id, format string, args ...any) error {
	f := oauthError(ErrInvalidRequest, format, args...)
	f.Message = "client_id " + truncate(id, 200) + ": " + f.Message
	return f
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// checkMetadataClientID checks the form of a metadata document's URL: https, a
// host, a path, no user information, no fragment, no dot segments.
func checkMetadataClientID(id string) (*url.URL, error) {
	if len(id) > MaxMetadataClientIDLen {
		return nil, metaErr(id, "a client ID metadata document URL is at most %d characters", MaxMetadataClientIDLen)
	}
	if err := CheckRedirectURI("client_id", id, false); err != nil {
		return nil, metaErr(id, "%s", err.Error())
	}
	u, _ := url.Parse(id)
	if u.Scheme != "https" {
		return nil, metaErr(id, "a client ID metadata document URL must use https")
	}
	if u.Path == "" || u.Path == "/" {
		return nil, metaErr(id, "a client ID metadata document URL must have a path")
	}
	for _, seg := range strings.Split(u.EscapedPath(), "/") {
		if seg == "." || seg == ".." || strings.EqualFold(seg, "%2e") || strings.EqualFold(seg, "%2e%2e") {
			return nil, metaErr(id, "a client ID metadata document URL must not have dot segments")
		}
	}
	return u, nil
}

// metadataClient is the client a metadata document describes, fetched now (or
// from the fetcher's cache); nil, nil when documents are off.
func (r *Clients) metadataClient(ctx context.Context, id string) (*client, error) {
	if r.metadata == nil {
		return nil, nil
	}
	u, err := checkMetadataClientID(id)
	if err != nil {
		return nil, err
	}
	body, err := r.metadata.Fetch(ctx, id)
	if err != nil {
		if f, ok := fault.As(err); ok && (f.Class == fault.Unavailable || f.Class == fault.TooMany) {
			return nil, f
		}
		return nil, metaErr(id, "its client metadata document: %s", err.Error())
	}
	var doc metadataDocument
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, metaErr(id, "its client metadata document is not a JSON object")
	}
	if doc.ClientID != id {
		return nil, metaErr(id, "its client metadata document names another client_id (%.200q): it must be the document's own URL", doc.ClientID)
	}
	if doc.ClientSecret != nil || (doc.TokenEndpointAuthMethod != "" && doc.TokenEndpointAuthMethod != TokenAuthMethodNone) {
		return nil, metaErr(id, "a client described by a metadata document is public: token_endpoint_auth_method none, no client_secret")
	}
	// The grants the document lists are its only ones; a document without
	// grant_types keeps every grant, as documents were read before (MCP clients
	// publish some without and refresh).
	var grants []string
	if len(doc.GrantTypes) > 0 {
		grants = doc.GrantTypes
	}
	for _, g := range grants {
		if !slices.Contains(GrantTypes, g) {
			return nil, metaErr(id, "grant_types: authorization_code, refresh_token and %s only, got %.50q", GrantTypeJWTBearer, g)
		}
	}
	if grants != nil && !slices.Contains(grants, grantAuthorizationCode) {
		return nil, metaErr(id, "grant_types must include authorization_code")
	}
	if len(doc.ResponseTypes) > 0 && !slices.Equal(doc.ResponseTypes, []string{"code"}) {
		return nil, metaErr(id, "response_types: code only")
	}
	if len(doc.RedirectURIs) == 0 {
		return nil, metaErr(id, "its client metadata document has no redirect_uris")
	}
	name := doc.ClientName
	if name == "" {
		name = u.Hostname()
	}
	for _, u := range doc.RedirectURIs {
		if err := CheckClientRedirectURI("redirect_uri", u, false, true); err != nil { // as selfreg.go (a public client), even in dev mode
			return nil, metaErr(id, "its client metadata document: %s", err.Error())
		}
	}
	for _, u := range doc.PostLogoutRedirectURIs { // as redirect_uris (Logout.Confirm)
		if err := CheckClientRedirectURI("post_logout_redirect_uri", u, false, true); err != nil {
			return nil, metaErr(id, "its client metadata document: %s", err.Error())
		}
	}
	spec := ClientSpec{Name: &name, RedirectURIs: doc.RedirectURIs}
	if len(doc.PostLogoutRedirectURIs) > 0 {
		spec.PostLogoutRedirectURIs = doc.PostLogoutRedirectURIs
	}
	if err := r.validateSpec(&spec); err != nil {
		return nil, metaErr(id, "its client metadata document: %s", err.Error())
	}
	if doc.BackchannelLogoutURI != "" {
		if err := CheckBackchannelLogoutURI(doc.BackchannelLogoutURI, false); err != nil {
			return nil, metaErr(id, "its client metadata document: %s", err.Error())
		}
	}
	return &client{
		id: id, name: *spec.Name, sector: id, redirectURIs: spec.RedirectURIs,
		scopes: DefaultScopes, dynamic: true, selfRegistered: true, notice: MetadataNotice(u.Host),
		idTokenAlg: IDTokenAlgs[0], accessTokenAudience: AudienceBaseURL,
		public: true, loopbackAnyPort: true,
		origins:    originsOf(true, nil, spec.RedirectURIs), // a public client's: its redirect URIs'
		grantTypes: grants, anonymous: true, postLogoutRedirectURIs: spec.PostLogoutRedirectURIs,
		backchannelLogoutURI: doc.BackchannelLogoutURI,
	}, nil
}
