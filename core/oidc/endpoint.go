package oidc

import (
	"context"
	"net/url"
)

// ClientRequest is a client-authenticated request to the token, introspection or
// revocation endpoint, as the HTTP edge read it: the form parameters and the
// credentials of an `Authorization: Basic` header, if any.
type ClientRequest struct {
	Params url.Values
	// Basic holds the credentials of an Authorization: Basic header as sent
	// (form-urlencoded, RFC 6749 2.3.1); nil when the request has none.
	Basic *BasicCredentials
}

// BasicCredentials are the user and password of an Authorization: Basic header.
type BasicCredentials struct {
	ID, Secret string
}

// Authenticate applies the endpoints' parsing rules (no parameter given twice,
// except resource, RFC 8707) and authenticates the client: client_secret_basic or
// client_secret_post, not both. It returns the client's id. A public client is
// refused (introspection is for clients that can authenticate: public.go).
func (s *Service) Authenticate(ctx context.Context, req ClientRequest) (string, error) {
	return s.authenticateRequest(ctx, req, false)
}

// AuthenticateRevoker is Authenticate for the revocation endpoint, which a public
// client may also use with its client_id alone (RFC 7009 2.1; public.go).
func (s *Service) AuthenticateRevoker(ctx context.Context, req ClientRequest) (string, error) {
	return s.authenticateRequest(ctx, req, true)
}

func (s *Service) authenticateRequest(ctx context.Context, req ClientRequest, allowPublic bool) (string, error) {
	id, secret, method, err := credentials(req)
	if err != nil {
		return "", err
	}
	if id == "" {
		return "", oauthError(ErrInvalidClient, "client authentication failed")
	}
	cl, err := s.clients.authenticate(ctx, id, secret, method)
	if err != nil {
		return "", err
	}
	if cl == nil {
		return "", oauthError(ErrInvalidClient, "client authentication failed")
	}
	if cl.public && !allowPublic {
		return "", errPublicNotAllowed()
	}
	return id, nil
}

// credentials applies the endpoints' parsing rules and returns the client's
// credentials, unchecked, and the client authentication method they came by
// (client_secret_basic, client_secret_post, or none without a secret).
func credentials(req ClientRequest) (id, secret, method string, err error) {
	for name, values := range req.Params {
		// resource may repeat; the grant handlers refuse more than one with
		// invalid_target.
		if len(values) > 1 && name != "resource" {
			return "", "", "", oauthError(ErrInvalidRequest, "parameter %s is given more than once", name)
		}
	}
	if b := req.Basic; b != nil {
		if req.Params.Has("client_secret") {
			return "", "", "", oauthError(ErrInvalidRequest, "use one client authentication method, not two")
		}
		var err1, err2 error
		id, err1 = url.QueryUnescape(b.ID) // RFC 6749 2.3.1
		secret, err2 = url.QueryUnescape(b.Secret)
		if err1 != nil || err2 != nil {
			return "", "", "", oauthError(ErrInvalidClient, "malformed basic credentials")
		}
		if formID := req.Params.Get("client_id"); formID != "" && formID != id {
			return "", "", "", oauthError(ErrInvalidRequest, "client_id differs from the authenticated client")
		}
		return id, secret, authBasic, nil
	}
	method = TokenAuthMethodNone
	if req.Params.Has("client_secret") {
		method = authPost
	}
	return req.Params.Get("client_id"), req.Params.Get("client_secret"), method, nil
}

// The client authentication methods by a secret (RFC 7591 2).
const (
	authBasic = "client_secret_basic"
	authPost  = "client_secret_post"
)

// grantHandler serves one grant_type of the token endpoint for the client of the
// request (caller), which it authenticates with caller.in in the transaction that
// issues the tokens, and with caller.refuse when it refuses the request before.
// A grant is added by adding a handler to grantHandlers.
type grantHandler func(ctx context.Context, s *Service, c *caller, params url.Values) (*TokenResponse, error)

// grantHandlers are the token endpoint's grants, by grant_type.
var grantHandlers = map[string]grantHandler{
	grantAuthorizationCode: func(ctx context.Context, s *Service, c *caller, p url.Values) (*TokenResponse, error) {
		return s.exchangeCode(ctx, c, p.Get("code"), p.Get("redirect_uri"), p.Get("code_verifier"), p["resource"]...)
	},
	grantRefreshToken: func(ctx context.Context, s *Service, c *caller, p url.Values) (*TokenResponse, error) {
		return s.refresh(ctx, c, p.Get("refresh_token"), p.Get("scope"), p["resource"]...)
	},
	GrantTypeJWTBearer: func(ctx context.Context, s *Service, c *caller, p url.Values) (*TokenResponse, error) {
		return s.jwtBearer(ctx, c, p)
	},
}

// GrantTypes are the grant types the token endpoint serves, for discovery.
var GrantTypes = []string{grantAuthorizationCode, grantRefreshToken, GrantTypeJWTBearer}

// The grant types of the code flow.
const (
	grantAuthorizationCode = "authorization_code"
	grantRefreshToken      = "refresh_token"
)

// Token is the token endpoint (RFC 6749 3.2): the parsing rules, the client's
// authentication, then the grant_type's handler. The client is read once: a static
// one from memory, a dynamic one in the transaction that issues its tokens (see
// caller). Every refusal is a fault with an OAuth code (oauthError); anything else
// is a server or store failure.
func (s *Service) Token(ctx context.Context, req ClientRequest) (*TokenResponse, error) {
	id, secret, method, err := credentials(req)
	if err != nil {
		return nil, err
	}
	c, err := s.clients.caller(ctx, id, secret, method)
	if err != nil {
		return nil, err
	}
	grantType := req.Params.Get("grant_type")
	if grantType == "" {
		return nil, c.refuse(ctx, oauthError(ErrInvalidRequest, "grant_type is required"))
	}
	handle, ok := grantHandlers[grantType]
	if !ok {
		return nil, c.refuse(ctx, oauthError(ErrUnsupportedGrantType, "grant_type must be authorization_code, refresh_token or "+GrantTypeJWTBearer))
	}
	// A client that registered its grant_types may use no other (RFC 7591 2): a
	// static client is refused now, a dynamic one once caller.in has read it.
	c.grantType = grantType
	if c.static != nil && !c.static.allowsGrant(grantType) {
		return nil, errGrantNotRegistered(grantType)
	}
	return handle(ctx, s, c, req.Params)
}
