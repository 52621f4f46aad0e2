package oidc

import (
	"context"
	"errors"

	"github.com/palmgate/palmgate/storage"
)

// caller is the client of a token request, authenticated once. A static client is
// authenticated as the request is read, in memory: no store read. A dynamic client
// is authenticated in the transaction that issues its tokens: the one read of its
// record there both checks its secret and proves it is still registered. A deletion
// committed before refuses the request; one committed while the transaction runs
// makes it conflict (it runs again and refuses); one committed after it finds its
// grant in Clients.Delete's revocation scan. No grant outlives its client.
type caller struct {
	reg    *Clients
	id     string
	secret string
	// method is the client authentication method of the request (credentials).
	method string
	// trusted: the code calling ExchangeCode or Refresh authenticated the client
	// itself (a first party): its secret is not checked, only that it is registered.
	trusted bool
	// static is the static client, authenticated already; nil for a dynamic one.
	static *client
	// grantType is the token request's grant, which in checks the client may use
	// ("": not checked, a first party's call).
	grantType string
}

// errGrantNotRegistered refuses a grant the client did not register (RFC 6749
// 5.2 unauthorized_client, as Hydra answers it).
func errGrantNotRegistered(grantType string) error {
	return oauthError(ErrUnauthorizedClient, "the client is not registered for the grant type %s", grantType)
}

// caller returns the caller of a token request presenting id and secret: a static
// client authenticated now (invalid_client when it fails), or a dynamic one that
// caller.in authenticates.
func (r *Clients) caller(ctx context.Context, id, secret, method string) (*caller, error) {
	if id == "" {
		return nil, oauthError(ErrInvalidClient, "client authentication failed")
	}
	if st := r.get(id); st != nil {
		if st.public && secret != "" {
			return nil, errPublicSecret()
		}
		cl := r.authenticateStatic(id, secret)
		if cl == nil {
			return nil, oauthError(ErrInvalidClient, "client authentication failed")
		}
		return &caller{reg: r, id: id, static: cl}, nil
	}
	if IsMetadataClientID(id) && r.metadata != nil {
		// A client ID metadata document's client (metadoc.go): public, read from its
		// document (or the fetcher's cache), not from the store.
		cl, err := r.metadataClient(ctx, id)
		switch {
		case err != nil || cl == nil:
			return nil, oauthError(ErrInvalidClient, "client authentication failed: the client's metadata document is unusable")
		case secret != "":
			return nil, errPublicSecret()
		}
		return &caller{reg: r, id: id, static: cl}, nil
	}
	if !validClientID(id) {
		r.authenticateStatic("", secret) // the same work as for an unknown client
		return nil, oauthError(ErrInvalidClient, "client authentication failed")
	}
	return &caller{reg: r, id: id, secret: secret, method: method}, nil
}

// trustedCaller is the caller of a client the calling code authenticated itself.
func (r *Clients) trustedCaller(id string) (*caller, error) {
	if cl := r.get(id); cl != nil {
		return &caller{reg: r, id: id, static: cl, trusted: true}, nil
	}
	if !validClientID(id) {
		return nil, oauthError(ErrInvalidClient, "unknown client")
	}
	return &caller{reg: r, id: id, trusted: true}, nil
}

// prefetch asks txn for keys, the first reads of a transaction that issues tokens,
// and for the caller's record (a dynamic client's): on a database server, one round
// trip for them all.
func (c *caller) prefetch(txn storage.Txn, keys ...[]byte) error {
	if c.static == nil {
		keys = append(keys, clientKey(c.id))
	}
	return storage.Prefetch(txn, keys...)
}

// in returns the caller's client, authenticated in txn, the transaction that issues
// its tokens: call it first in that transaction, before anything else is read.
func (c *caller) in(txn storage.Txn) (*client, error) {
	if c.static != nil {
		return c.static, nil
	}
	rec, err := readClient(txn, c.id)
	switch {
	case errors.Is(err, ErrClientNotFound) && c.trusted:
		return nil, oauthError(ErrInvalidClient, "the client was removed")
	case errors.Is(err, ErrClientNotFound):
		c.reg.authenticateStatic("", c.secret) // the same work as for a wrong secret
		return nil, oauthError(ErrInvalidClient, "client authentication failed")
	case err != nil:
		return nil, err
	case !rec.ExpiresAt.IsZero() && !c.reg.now().Before(rec.ExpiresAt):
		return nil, oauthError(ErrInvalidClient, "the client's registration lapsed") // selfreg.go
	}
	cl := c.reg.dynamicClient(rec)
	if !c.trusted && cl.public && c.secret != "" {
		return nil, errPublicSecret()
	}
	if !c.trusted && c.reg.checkSecret(cl, c.secret) == nil {
		return nil, oauthError(ErrInvalidClient, "client authentication failed")
	}
	if !c.trusted {
		if err := cl.checkAuthMethod(c.method); err != nil {
			return nil, err
		}
	}
	if c.grantType != "" && !cl.allowsGrant(c.grantType) {
		return nil, errGrantNotRegistered(c.grantType)
	}
	return cl, nil
}

// refuse returns err, a refusal of the request before its transaction, unless the
// caller is not authenticated yet and fails to be: then invalid_client, as when
// authentication comes first (a request without the client's secret learns nothing
// of a code or a refresh token), or unauthorized_client when it may not use the
// request's grant. It reads the client on this error path only.
func (c *caller) refuse(ctx context.Context, err error) error {
	if c.static != nil || c.trusted {
		return err
	}
	cl, aerr := c.reg.authenticate(ctx, c.id, c.secret, c.method)
	if aerr != nil {
		return aerr
	}
	if cl == nil {
		return oauthError(ErrInvalidClient, "client authentication failed")
	}
	if c.grantType != "" && !cl.allowsGrant(c.grantType) {
		return errGrantNotRegistered(c.grantType)
	}
	return err
}
