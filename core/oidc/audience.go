package oidc

// The values of a client's access_token_audience: what the `aud` of its access
// tokens holds when the grant names no `resource` (issue 21, item 2).
const (
	// AudienceBaseURL: the service's public base URL (the `issuer` option), the
	// default: what palmgate_bearer's `audience` and every gateway configured before
	// this option expect.
	AudienceBaseURL = "base_url"
	// AudienceClientID: the client_id, as oauth2-proxy's bearer mode and oauth4webapi
	// expect of a token of their own client.
	AudienceClientID = "client_id"
	// AudienceBoth: the base URL and the client_id (RFC 9068 2.2 allows a list).
	AudienceBoth = "both"
)

// AccessTokenAudiences are the values of access_token_audience, the default first.
var AccessTokenAudiences = []string{AudienceBaseURL, AudienceClientID, AudienceBoth}

// accessAudience is the `aud` of the access tokens of a grant of client cl: the
// grant's RFC 8707 resource alone when it has one (the token is then meant for that
// resource server only, whatever the client's choice), else the client's choice of
// the base URL, its client_id, or both.
func (s *Service) accessAudience(cl *client, resource string) []string {
	switch {
	case resource != "":
		return []string{resource}
	case cl.accessTokenAudience == AudienceClientID:
		return []string{cl.id}
	case cl.accessTokenAudience == AudienceBoth:
		return []string{s.base, cl.id}
	}
	return []string{s.base}
}
