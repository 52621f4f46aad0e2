package oidc

import "crypto/sha256"

// The storage layout of this package:
//
//	oidc/ar/{authRequestId}     -> authorization request (JSON), kept a day past expiry
//	oidc/code/{sha256(code)}    -> authorization code (JSON), until it expires
//	oidc/grant/{grantId}        -> grant: the refresh family and its revocation (JSON)
//	oidc/revoked/{grantId}      -> revoked grant: expiry of its last access token (ms)
//	oidc/pairwise-secret        -> generated pairwise secret, when none is configured
//
// Codes are stored by hash, so the store never holds a usable code.

func authRequestKey(id string) []byte { return []byte("oidc/ar/" + id) }
func grantKey(id string) []byte       { return []byte("oidc/grant/" + id) }
func pairwiseSecretKey() []byte       { return []byte("oidc/pairwise-secret") }
func revokedPrefix() []byte           { return []byte("oidc/revoked/") }
func revokedKey(id string) []byte     { return []byte("oidc/revoked/" + id) }

func codeKey(code string) []byte {
	sum := sha256.Sum256([]byte(code))
	return append([]byte("oidc/code/"), sum[:]...)
}
