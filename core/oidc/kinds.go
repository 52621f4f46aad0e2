package oidc

import "github.com/palmgate/palmgate/core/fault"

// Kinds of authorization refusals that are answered to the person's browser, not
// to the client (their redirect_uri is not known good, or the login is gone): the
// edge's pages tell them apart with errors.Is to say in plain words what went
// wrong. Each is invalid_request in the OAuth dialect, as before.
var (
	// ErrUnknownClient: the client_id names no client.
	ErrUnknownClient = &fault.Error{Class: fault.Invalid, Code: ErrInvalidRequest, Message: "unknown client_id"}
	// ErrRedirectURINotRegistered: the redirect_uri is not one of the client's.
	ErrRedirectURINotRegistered = &fault.Error{Class: fault.Invalid, Code: ErrInvalidRequest, Message: "redirect_uri is not registered for this client"}
	// ErrUnknownAuthRequest: the auth_request_id names no request, or one that
	// has expired.
	ErrUnknownAuthRequest = &fault.Error{Class: fault.Invalid, Code: ErrInvalidRequest, Message: "unknown or expired auth_request_id"}
	// ErrRequestAnswered: the authorization request was already answered (a code
	// is issued once).
	ErrRequestAnswered = &fault.Error{Class: fault.Invalid, Code: ErrInvalidRequest, Message: "this authorization request was already answered"}
)
