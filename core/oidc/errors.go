package oidc

import (
	"fmt"
	"strings"

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

// TemporarilyUnavailable is the OAuth code of a refusal that may be retried (RFC
// 6749 4.1.2.1): the edge answers every Unavailable or TooMany fault with it.
const TemporarilyUnavailable = "temporarily_unavailable"

// oauthCodes are the codes of OAuth's vocabulary: a fault with one of them is
// answered as it is in the OAuth dialect; any other fault there (a palm or
// registry fault reaching the token endpoint) is a server error.
var oauthCodes = map[string]bool{
	ErrInvalidRequest: true, ErrInvalidClient: true, ErrInvalidGrant: true, ErrUnauthorizedClient: true,
	ErrUnsupportedGrantType: true, ErrUnsupportedResponseType: true, ErrInvalidScope: true,
	ErrAccessDenied: true, ErrLoginRequired: true, ErrInvalidToken: true, ErrInsufficientScope: true,
	ErrInvalidTarget: true, ErrRequestNotSupported: true, ErrRequestURINotSupported: true,
	TemporarilyUnavailable: true,
}

// IsOAuthCode reports whether code is an error code of the OAuth dialect.
func IsOAuthCode(code string) bool { return oauthCodes[code] }

// oauthClass is the class of an OAuth error code: Unauthorized for invalid_client
// and invalid_token, Forbidden for insufficient_scope, Invalid otherwise.
func oauthClass(code string) fault.Class {
	switch code {
	case ErrInvalidClient, ErrInvalidToken:
		return fault.Unauthorized
	case ErrInsufficientScope:
		return fault.Forbidden
	}
	return fault.Invalid
}

// oauthError returns the OAuth error code as a fault of core's model, its class
// by the code (oauthClass) and the formatted message its error_description.
func oauthError(code, format string, args ...any) *fault.Error {
	return &fault.Error{Class: oauthClass(code), Code: code, Message: fmt.Sprintf(format, args...)}
}

// RedirectError is an authorization error that goes back to the client (RFC 6749
// 4.1.2.1, OIDC Core 3.1.2.6): the fault, and the redirect_uri, state and response
// mode of the request whose client and redirect_uri were valid. The edge's OAuth
// dialect answers it with a redirect (or a form_post page) instead of a body.
type RedirectError struct {
	Fault        *fault.Error
	RedirectURI  string
	State        string
	ResponseMode string
	// Confirm: the redirect_uri is whatever an anonymous registrant chose (RFC
	// 7591, a client ID metadata document), and no one has signed in yet. Sent
	// there at once, the issuer's origin would be an open redirector (RFC 9700
	// 4.11.2): the edge shows the refusal and the host to the person, who may
	// follow it on.
	Confirm bool
}

func (e *RedirectError) Error() string { return e.Fault.Code + ": " + e.Fault.Message }

// Unwrap returns the fault.
func (e *RedirectError) Unwrap() error { return e.Fault }

// Redirect is the answer that sends the error back to the client, from the issuer
// iss.
func (e *RedirectError) Redirect(iss string) *Redirect {
	return &Redirect{URI: e.RedirectURI, Error: e.Fault.Code, Description: e.Fault.Message, State: e.State, Issuer: iss, Mode: e.ResponseMode}
}

// DescriptionChars is an error_description in the characters RFC 6749 4.1.2.1
// (and 5.2) allows: %x20-21 / %x23-5B / %x5D-7E. Descriptions quote what the
// request carried (%q): a double quote becomes a single one, a backslash a
// slash, and any other character (a control, a non-ASCII letter) a '?'. The
// redirects use it, and the edge's JSON error bodies.
func DescriptionChars(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '"':
			return '\''
		case r == '\\':
			return '/'
		case r < 0x20 || r > 0x7e:
			return '?'
		}
		return r
	}, s)
}
