package oidc

import "net/url"

// Error codes of OpenID Connect Core 1.0 section 3.1.2.6 for request objects.
const (
	ErrRequestNotSupported    = "request_not_supported"
	ErrRequestURINotSupported = "request_uri_not_supported"
)

// refuseRequestObject refuses an authorization request that passes its parameters
// in a request object (OIDC Core section 6): palmgate reads none, and ignoring one
// would answer a request other than the one the client signed. The error goes back
// to the client (client and redirect_uri are valid by then; see Authorize).
func refuseRequestObject(params url.Values) error {
	switch {
	case params.Has("request"):
		return oauthError(ErrRequestNotSupported, "request objects (the request parameter) are not supported")
	case params.Has("request_uri"):
		return oauthError(ErrRequestURINotSupported, "the request_uri parameter is not supported")
	}
	return nil
}
