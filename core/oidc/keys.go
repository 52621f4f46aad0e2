package oidc

import "crypto/sha256"

// The storage layout of this package:
//
//	oidc/ar/{authRequestId}     -> authorization request (JSON), kept a day past expiry
//	oidc/code/{sha256(code)}    -> authorization code (JSON), until it expires
//	oidc/grant/{grantId}        -> grant: the refresh family and its revocation (JSON)
//	oidc/revoked/{grantId}      -> revoked grant: expiry of its last access token (ms)
//	oidc/pairwise-secret        -> generated pairwise secret, when none is configured
//	oidc/client/{clientId}      -> dynamic client (JSON; secrets as keyed hashes)
//	oidc/client-owner/{owner}/{clientId} -> "" (a developer's clients, for the portal)
//	oidc/client-owner/{owner}   -> the owner's last created client id (serialises creates)
//	oidc/client-secret-key      -> key of the dynamic clients' secret hashes
//	oidc/cors-origin/{origin}/{clientId} -> "" (the dynamic clients' allowed origins, for CORS)
//	oidc/selfreg/{network}/{clientId} -> expiry in ms (RFC 7591 clients, for their caps; network "" when uncounted)
//	oidc/selfreg-mark           -> the last self-registered client id (serialises registrations)
//	oidc/selfreg-terms/{clientId} -> a self-registered client's grant_types and auth method (JSON; selfreg_terms.go)
//	oidc/sso/{sha256(id)}       -> SSO session (JSON), until it expires
//	oidc/sso-human/{humanId}/{sha256(id)} -> "" (a person's SSO sessions), until the session expires
//	oidc/sso-grant/{sha256(id)}/{grantId} -> the key of the code that starts it ("" in an entry written before single logout deleted codes in flight) (the logins made through an SSO session, written with their code), until the session expires
//	oidc/sso-next/{sha256(id)}  -> sha256 of the session the same person's new scan in that browser started (it took the logins), until that one expires
//	oidc/sso-index-since        -> first start that indexed SSO sessions (ms; older ones may be in no index, endhuman.go)
//	oidc/consent/{humanId}/{clientId} -> scopes the human consented to (JSON)
//	oidc/actor/{deviceId}0x00{clientId} -> agent grant: the human lets the agent act for them (JSON)
//	oidc/actor-human/{humanId}/{deviceId}0x00{clientId} -> "" (a human's agent grants)
//	oidc/actor-jti/{sha256(deviceId 0x00 jti)} -> "" (a used agent assertion), until it expires
//
// Codes and SSO session ids are stored by hash, so the store never holds a usable
// code or session.

func authRequestKey(id string) []byte  { return []byte("oidc/ar/" + id) }
func grantKey(id string) []byte        { return []byte("oidc/grant/" + id) }
func grantPrefix() []byte              { return []byte("oidc/grant/") }
func clientKey(id string) []byte       { return []byte("oidc/client/" + id) }
func clientPrefix() []byte             { return []byte("oidc/client/") }
func clientSecretKeyKey() []byte       { return []byte("oidc/client-secret-key") }
func ownerPrefix(owner string) []byte  { return []byte("oidc/client-owner/" + owner + "/") }
func ownerMarkKey(owner string) []byte { return []byte("oidc/client-owner/" + owner) }
func ownerKey(owner, id string) []byte {
	return []byte("oidc/client-owner/" + owner + "/" + id)
}
func originPrefix(origin string) []byte { return []byte("oidc/cors-origin/" + origin + "/") }
func originKey(origin, id string) []byte {
	return []byte("oidc/cors-origin/" + origin + "/" + id)
}
func selfRegPrefix() []byte                { return []byte("oidc/selfreg/") }
func selfRegKey(network, id string) []byte { return []byte("oidc/selfreg/" + network + "/" + id) }
func selfRegMarkKey() []byte               { return []byte("oidc/selfreg-mark") }
func pairwiseSecretKey() []byte            { return []byte("oidc/pairwise-secret") }
func revokedPrefix() []byte                { return []byte("oidc/revoked/") }
func revokedKey(id string) []byte          { return []byte("oidc/revoked/" + id) }

func codeKey(code string) []byte {
	sum := sha256.Sum256([]byte(code))
	return append([]byte("oidc/code/"), sum[:]...)
}

func sessionKey(hash string) []byte { return []byte("oidc/sso/" + hash) }
func consentPrefix() []byte         { return []byte("oidc/consent/") }
func consentKey(humanID, clientID string) []byte {
	return []byte("oidc/consent/" + humanID + "/" + clientID)
}

func actorGrantPrefix() []byte { return []byte("oidc/actor/") }
func actorGrantKey(deviceID, clientID string) []byte {
	return []byte("oidc/actor/" + deviceID + "\x00" + clientID)
}
func humanActorGrantPrefix(humanID string) []byte { return []byte("oidc/actor-human/" + humanID + "/") }
func humanActorGrantKey(humanID, deviceID, clientID string) []byte {
	return append(humanActorGrantPrefix(humanID), deviceID+"\x00"+clientID...)
}
func actorJTIKey(deviceID, jti string) []byte {
	sum := sha256.Sum256([]byte(deviceID + "\x00" + jti))
	return append([]byte("oidc/actor-jti/"), sum[:]...)
}
