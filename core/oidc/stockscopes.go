package oidc

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
)

// The standard scopes of OpenID Connect Core 5.4 beside openid.
const (
	ScopeProfile = "profile"
	ScopeEmail   = "email"
	ScopeAddress = "address"
	ScopePhone   = "phone"
)

// StandardScopes are granted to every client that asks, whatever its configured
// scopes: stock relying parties (Auth.js, oauth2-proxy) ask for `openid profile
// email` out of the box, and OpenID Connect Core 3.1.2.1 and RFC 6749 3.3 let the
// server grant a scope with less than it names. palmgate is pseudonymous: they
// carry no claim but a pseudonymous preferred_username under profile (issue 21).
var StandardScopes = []string{ScopeProfile, ScopeEmail, ScopeAddress, ScopePhone}

// mayAsk reports whether the client may ask for scope sc: one of its configured
// scopes, or a standard one.
func (cl *client) mayAsk(sc string) bool {
	return slices.Contains(cl.scopes, sc) || slices.Contains(StandardScopes, sc)
}

// preferredUsernameLen is the number of hex digits of the preferred_username's
// hash: 40 bits, so that two people of one application rarely share a name (it is
// a display name, never an identifier: OIDC Core 5.7 says an RP must not rely on
// its uniqueness; `sub` is the identifier).
const preferredUsernameLen = 10

// PreferredUsername is the pseudonymous `preferred_username` of pairwise subject
// sub: "user-" and the first 10 hex digits of SHA-256 of the sub. It derives from
// the pairwise sub, so it differs per application (sector) like the sub, is stable
// across logins, and reveals nothing of the person or of the sub itself.
func PreferredUsername(sub string) string {
	sum := sha256.Sum256([]byte("palmgate preferred_username\x00" + sub))
	return "user-" + hex.EncodeToString(sum[:])[:preferredUsernameLen]
}

// ProfileClaims are the claims of scope `profile` for pairwise subject sub, given
// the granted scopes: preferred_username when profile was granted, else none.
func ProfileClaims(sub string, scopes []string) map[string]string {
	if !slices.Contains(scopes, ScopeProfile) {
		return nil
	}
	return map[string]string{"preferred_username": PreferredUsername(sub)}
}
