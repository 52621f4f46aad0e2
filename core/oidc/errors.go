package oidc

import (
	"errors"
	"fmt"

	"github.com/palmgate/palmgate/core/fault"
)

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

// Error is an OAuth error answered to a client: a fault of core's error model
// (Fault) whose code is the OAuth error code, with what a redirect needs. The class
// is Unauthorized for invalid_client and invalid_token, Forbidden for
// insufficient_scope, Invalid otherwise; the edge's OAuth dialect redirects an
// authorization error with RedirectURI set instead.
type Error struct {
	Code        string
	Description string
	// RedirectURI, State and ResponseMode are set when the error goes back to the
	// client (an authorization request whose client and redirect_uri were valid).
	RedirectURI  string
	State        string
	ResponseMode string
}

// Redirect is the answer that sends the error back to the client (RedirectURI set),
// from the issuer iss.
func (e *Error) Redirect(iss string) *Redirect {
	return &Redirect{URI: e.RedirectURI, Error: e.Code, Description: e.Description, State: e.State, Issuer: iss, Mode: e.ResponseMode}
}

func (e *Error) Error() string { return e.Code + ": " + e.Description }

// Fault is the error in core's model.
func (e *Error) Fault() *fault.Error {
	class := fault.Invalid
	switch e.Code {
	case ErrInvalidClient, ErrInvalidToken:
		class = fault.Unauthorized
	case ErrInsufficientScope:
		class = fault.Forbidden
	}
	return &fault.Error{Class: class, Code: e.Code, Message: e.Description}
}

func oauthError(code, format string, args ...any) *Error {
	return &Error{Code: code, Description: fmt.Sprintf(format, args...)}
}

// OAuthFault returns the fault of err when it is one of this package's OAuth errors
// (an *Error, or ErrOtherBrowser): the errors the OAuth dialect answers as they are.
// Any other error (a palm or store failure) is a server error there.
func OAuthFault(err error) (*fault.Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Fault(), true
	}
	if errors.Is(err, ErrOtherBrowser) {
		return ErrOtherBrowser, true
	}
	return nil, false
}
