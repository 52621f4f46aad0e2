package bearer

import "slices"

// HasAudience reports whether the token's `aud` contains aud: a resource server
// refuses tokens issued for another resource (RFC 8707, RFC 9068 4).
func (c *Claims) HasAudience(aud string) bool {
	return slices.Contains(c.Audience, aud)
}
