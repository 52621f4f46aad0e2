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
// client_secret_post, not both. It returns the client's id.
func (s *Service) Authenticate(ctx context.Context, req ClientRequest) (string, error) {
	for name, values := range req.Params {
		// resource may repeat; the grant handlers refuse more than one with
		// invalid_target.
		if len(values) > 1 && name != "resource" {
			return "", oauthError(ErrInvalidRequest, "parameter %s is given more than once", name)
		}
	}
	var id, secret string
	if b := req.Basic; b != nil {
		if req.Params.Has("client_secret") {
			return "", oauthError(ErrInvalidRequest, "use one client authentication method, not two")
		}
		var err1, err2 error
		id, err1 = url.QueryUnescape(b.ID) // RFC 6749 2.3.1
		secret, err2 = url.QueryUnescape(b.Secret)
		if err1 != nil || err2 != nil {
			return "", oauthError(ErrInvalidClient, "malformed basic credentials")
		}
		if formID := req.Params.Get("client_id"); formID != "" && formID != id {
			return "", oauthError(ErrInvalidRequest, "client_id differs from the authenticated client")
		}
	} else {
		id, secret = req.Params.Get("client_id"), req.Params.Get("client_secret")
	}
	if err := s.AuthenticateClient(ctx, id, secret); err != nil {
		return "", err
	}
	return id, nil
}

// grantHandler serves one grant_type of the token endpoint for an authenticated
// client. A grant is added by adding a handler to grantHandlers.
type grantHandler func(ctx context.Context, s *Service, clientID string, params url.Values) (*TokenResponse, error)

// grantHandlers are the token endpoint's grants, by grant_type.
var grantHandlers = map[string]grantHandler{
	"authorization_code": func(ctx context.Context, s *Service, clientID string, p url.Values) (*TokenResponse, error) {
		return s.ExchangeCode(ctx, clientID, p.Get("code"), p.Get("redirect_uri"), p.Get("code_verifier"), p["resource"]...)
	},
	"refresh_token": func(ctx context.Context, s *Service, clientID string, p url.Values) (*TokenResponse, error) {
		return s.Refresh(ctx, clientID, p.Get("refresh_token"), p.Get("scope"), p["resource"]...)
	},
}

// GrantTypes are the grant types the token endpoint serves, for discovery.
var GrantTypes = []string{"authorization_code", "refresh_token"}

// Token is the token endpoint (RFC 6749 3.2): the parsing rules, the client's
// authentication, then the grant_type's handler. Every refusal is a fault with an
// OAuth code (oauthError); anything else is a server or store failure.
func (s *Service) Token(ctx context.Context, req ClientRequest) (*TokenResponse, error) {
	clientID, err := s.Authenticate(ctx, req)
	if err != nil {
		return nil, err
	}
	grantType := req.Params.Get("grant_type")
	if grantType == "" {
		return nil, oauthError(ErrInvalidRequest, "grant_type is required")
	}
	handle, ok := grantHandlers[grantType]
	if !ok {
		return nil, oauthError(ErrUnsupportedGrantType, "grant_type must be authorization_code or refresh_token")
	}
	return handle(ctx, s, clientID, req.Params)
}
