package oidc

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/palmgate/palmgate/storage"
)

// Public clients (RFC 6749 2.1, OAuth 2.1 2.1): browser apps (SPAs) and native
// apps, which cannot keep a secret. A public client has none: it authenticates
// with token_endpoint_auth_method `none` (its client_id only), every authorization
// request of it must carry a PKCE S256 code_challenge, and its refresh tokens
// rotate on every use (a reused one revokes the family), as every client's do.
//
// A public client that presents a secret anyway is refused (invalid_client), not
// served with the secret ignored: RFC 6749 2.3 forbids relying on a public
// client's credentials, and a secret sent by a client registered as public means a
// misconfigured app or one that believes it is confidential (and may leak that
// "secret" elsewhere); answering it loudly is what makes the mistake visible.
//
// What a public client may do besides the token endpoint: revoke its own tokens
// with its client_id only (RFC 7009 2.1 allows it; revoking harms no one but the
// token's holder, who is the client). Introspection (RFC 7662) is refused to it:
// it is for resource servers, which must authenticate so that tokens cannot be
// probed anonymously.
//
// CORS: a browser app calls discovery, the JWKS, the token, userinfo and revocation
// endpoints across origins. Each client has a set of allowed origins: its
// allowed_origins, plus, for a public client, the origins of its redirect URIs (a
// confidential client's code runs on a server, which needs no CORS: it gets
// origins only when they are configured). See the edge's CORS rules.

// TokenAuthMethodNone is the token_endpoint_auth_method of public clients.
const TokenAuthMethodNone = "none"

// errPublicSecret refuses a secret presented by a public client.
func errPublicSecret() error {
	return oauthError(ErrInvalidClient, "client authentication failed: a public client has no secret (token_endpoint_auth_method none)")
}

// errPublicNotAllowed refuses a public client at an endpoint for confidential ones.
func errPublicNotAllowed() error {
	return oauthError(ErrInvalidClient, "a public client cannot use this endpoint")
}

// originsOf returns a client's allowed origins: allowed, plus the origins of its
// redirect URIs when it is public, each once, in canonical form.
func originsOf(public bool, allowed, redirectURIs []string) []string {
	var out []string
	add := func(o string) {
		if o != "" && !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	for _, o := range allowed {
		add(CanonicalOrigin(o))
	}
	if public {
		for _, u := range redirectURIs {
			add(CanonicalOrigin(u))
		}
	}
	return out
}

// CanonicalOrigin returns the origin of an http(s) URL as a browser sends it in
// the Origin header (RFC 6454): lowercase scheme and host, the port only when it
// is not the scheme's default. "" when s is not an absolute http(s) URL.
func CanonicalOrigin(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") { // Parse lowercases the scheme
		return ""
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		return scheme + "://" + host + ":" + port
	}
	return scheme + "://" + host
}

// LoopbackOrigin reports whether origin is an http(s) origin in canonical form on
// a loopback host (localhost, *.localhost, 127.0.0.0/8, [::1]): a page served by
// a program on the person's own machine, such as a local MCP client's.
func LoopbackOrigin(origin string) bool {
	if origin == "" || CanonicalOrigin(origin) != origin {
		return false
	}
	u, err := url.Parse(origin)
	return err == nil && loopbackHost(u.Hostname())
}

// checkOrigin checks an allowed origin of a client: an http(s) origin with no
// path, query or fragment (`https://app.example.com`, `http://localhost:5173`),
// https unless its host is a loopback one or allowHTTP is set (as redirect URIs);
// never `*` or `null`. option names the field in the error.
func checkOrigin(option, origin string, allowHTTP bool) error {
	if origin == "*" || origin == "null" {
		return clientErr(ErrClientInvalid, "%s %.200q: name each origin (no wildcard, no null)", option, origin)
	}
	if err := CheckRedirectURI(option, origin, allowHTTP); err != nil {
		return err
	}
	u, _ := url.Parse(origin)
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || strings.HasSuffix(origin, "?") {
		return clientErr(ErrClientInvalid, "%s %.200q: an origin is scheme://host[:port], with no path or query", option, origin)
	}
	return nil
}

// allowsOrigin reports whether origin (as the Origin header sends it) is one of
// the client's allowed origins.
func (cl *client) allowsOrigin(origin string) bool {
	return origin != "" && slices.Contains(cl.origins, origin)
}

// OriginAllowed reports whether origin is an allowed origin of any client (the
// union whose CORS headers the token and revocation endpoints set before the
// request's client is known): the
// static clients' from memory, the dynamic ones' from their index in the store.
func (r *Clients) OriginAllowed(ctx context.Context, origin string) (bool, error) {
	if origin == "" || CanonicalOrigin(origin) != origin {
		return false, nil
	}
	if r.origins[origin] {
		return true, nil
	}
	found := false
	err := r.store.View(ctx, func(txn storage.Txn) error {
		found = false
		return txn.IterateKeys(originPrefix(origin), func([]byte) (bool, error) {
			found = true
			return false, nil
		})
	})
	return found, err
}

// ClientOriginAllowed reports whether origin is an allowed origin of the client
// clientID (false for an unknown client).
func (r *Clients) ClientOriginAllowed(ctx context.Context, clientID, origin string) (bool, error) {
	if origin == "" || clientID == "" {
		return false, nil
	}
	cl, err := r.lookup(ctx, clientID)
	if err != nil || cl == nil {
		return false, err
	}
	return cl.allowsOrigin(origin), nil
}

// putOrigins indexes a dynamic client's allowed origins (OriginAllowed) and
// removes the entries of the origins it had before (old).
func putOrigins(txn storage.Txn, id string, old, now []string, ttl time.Duration) error {
	for _, o := range old {
		if !slices.Contains(now, o) {
			if err := txn.Delete(originKey(o, id)); err != nil && !errors.Is(err, storage.ErrNotFound) {
				return err
			}
		}
	}
	for _, o := range now {
		if err := txn.Set(originKey(o, id), nil, ttl); err != nil {
			return err
		}
	}
	return nil
}

// origins is the record's set of allowed origins.
func (rec *clientRecord) origins() []string {
	return originsOf(rec.Public, rec.AllowedOrigins, rec.RedirectURIs)
}

// authMethod is a client's token_endpoint_auth_method.
func authMethod(public bool) string {
	if public {
		return TokenAuthMethodNone
	}
	return "client_secret_basic"
}

// validateOrigins checks and normalises a spec's allowed origins (at most
// MaxRedirectURIs, each CheckOrigin's form, https unless loopback or dev).
func (r *Clients) validateOrigins(spec *ClientSpec) error {
	if spec.AllowedOrigins == nil {
		return nil
	}
	if len(spec.AllowedOrigins) > MaxRedirectURIs {
		return clientErr(ErrClientInvalid, "allowed_origins: at most %d origins", MaxRedirectURIs)
	}
	origins := []string{}
	for _, o := range spec.AllowedOrigins {
		o = strings.TrimSpace(o)
		if err := checkOrigin("allowed_origin", o, r.devRedirects); err != nil {
			return err
		}
		if c := CanonicalOrigin(o); !slices.Contains(origins, c) {
			origins = append(origins, c)
		}
	}
	spec.AllowedOrigins = origins
	return nil
}

// checkPublicClient checks the options of a configured client that concern public
// clients (CheckClients).
func checkPublicClient(c Client, dev bool) error {
	if c.Public && (c.Secret != "" || c.SecretHash != "") {
		return fmt.Errorf("client %s: a public client has no secret: remove secret/secret_hash, or public", c.ID)
	}
	for _, o := range c.AllowedOrigins {
		if err := checkOrigin("allowed_origins", o, dev); err != nil {
			return fmt.Errorf("client %s: %w", c.ID, err)
		}
	}
	return nil
}
