package oidc

import "regexp"

// pkceString is the form of a PKCE code_verifier, and so of an S256
// code_challenge: 43 to 128 unreserved characters (RFC 7636 4.1, 4.2).
var pkceString = regexp.MustCompile(`^[A-Za-z0-9\-._~]{43,128}$`)
