package oidc

import "fmt"

// OAuth 2.0 and OpenID Connect error codes (RFC 6749 sections 4.1.2.1 and 5.2, OIDC
// Core 3.1.2.6, RFC 6750 section 3.1).
const (
	ErrInvalidRequest          = "invalid_request"
	ErrInvalidClient           = "invalid_client"
	ErrInvalidGrant            = "invalid_grant"
	ErrUnauthorizedClient      = "unauthorized_client"
	ErrUnsupportedGrantType    = "unsupported_grant_type"
	ErrUnsupportedResponseType = "unsupported_response_type"
	ErrInvalidScope            = "invalid_scope"
	ErrAccessDenied            = "access_denied"
	ErrLoginRequired           = "login_required"
	ErrInvalidToken            = "invalid_token"
	ErrInsufficientScope       = "insufficient_scope"
	ErrNotFound                = "not_found"
)

// Error is an OAuth error answered to a client. The HTTP edge picks the status from
// the code (invalid_client 401, invalid_token 401, insufficient_scope 403, otherwise
// 400) and, for authorization errors with RedirectURI set, redirects instead.
type Error struct {
	Code        string
	Description string
	// RedirectURI and State are set when the error goes back to the client by
	// redirect (the client and redirect_uri were valid).
	RedirectURI string
	State       string
}

func (e *Error) Error() string { return e.Code + ": " + e.Description }

func oauthError(code, format string, args ...any) *Error {
	return &Error{Code: code, Description: fmt.Sprintf(format, args...)}
}
