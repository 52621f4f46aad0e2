package oidc

import (
	"time"

	"github.com/palmgate/palmgate/core/keys"
)

// KeyLifetimes is how long after its retirement the key of each signing algorithm
// must still verify what it signed (keys.WithLifetimes), for a service with these
// token lifetimes. ES256 signs access tokens (accessTTL) and refresh tokens (at
// most refreshTTL from their signing: a refresh keeps its grant's expiry). Every
// algorithm signs ID tokens, which live accessTTL but are accepted past their exp
// as a logout's id_token_hint (EndSession), which revokes their grant: a hint must
// verify for as long as the tokens of its grant may live, the same bound.
func KeyLifetimes(accessTTL, refreshTTL time.Duration) map[string]time.Duration {
	life := max(accessTTL, refreshTTL)
	out := make(map[string]time.Duration, len(keys.Algorithms))
	for _, alg := range keys.Algorithms {
		out[alg] = life
	}
	return out
}
