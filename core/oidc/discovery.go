package oidc

import (
	"slices"
)

// Discovery is the OpenID Provider Metadata (OpenID Connect Discovery 1.0, RFC 8414)
// at {issuer}/.well-known/openid-configuration. Its fields are in the order of their
// names, as the edge has always written them.
type Discovery struct {
	ACRValuesSupported                         []string `json:"acr_values_supported"`
	AuthorizationEndpoint                      string   `json:"authorization_endpoint"`
	BackchannelLogoutSessionSupported          bool     `json:"backchannel_logout_session_supported"` // backchannel.go: every logout token has sid
	BackchannelLogoutSupported                 bool     `json:"backchannel_logout_supported"`
	AuthorizationResponseISSParameterSupported bool     `json:"authorization_response_iss_parameter_supported"` // RFC 9207: iss on every authorization response
	ClaimsParameterSupported                   bool     `json:"claims_parameter_supported"`
	ClaimsSupported                            []string `json:"claims_supported"`
	ClientIDMetadataDocumentSupported          bool     `json:"client_id_metadata_document_supported,omitempty"` // metadoc.go
	CodeChallengeMethodsSupported              []string `json:"code_challenge_methods_supported"`
	EndSessionEndpoint                         string   `json:"end_session_endpoint"`
	GrantTypesSupported                        []string `json:"grant_types_supported"`
	IDTokenSigningAlgValuesSupported           []string `json:"id_token_signing_alg_values_supported"`
	IntrospectionEndpoint                      string   `json:"introspection_endpoint"`
	IntrospectionEndpointAuthMethodsSupported  []string `json:"introspection_endpoint_auth_methods_supported"`
	Issuer                                     string   `json:"issuer"`
	JWKSURI                                    string   `json:"jwks_uri"`
	PromptValuesSupported                      []string `json:"prompt_values_supported"`
	RegistrationEndpoint                       string   `json:"registration_endpoint,omitempty"` // RFC 7591, when open (selfreg.go)
	RequestParameterSupported                  bool     `json:"request_parameter_supported"`
	RequestURIParameterSupported               bool     `json:"request_uri_parameter_supported"`
	ResponseModesSupported                     []string `json:"response_modes_supported"`
	ResponseTypesSupported                     []string `json:"response_types_supported"`
	RevocationEndpoint                         string   `json:"revocation_endpoint"`
	RevocationEndpointAuthMethodsSupported     []string `json:"revocation_endpoint_auth_methods_supported"`
	ScopesSupported                            []string `json:"scopes_supported"`
	SubjectTypesSupported                      []string `json:"subject_types_supported"`
	TokenEndpoint                              string   `json:"token_endpoint"`
	TokenEndpointAuthMethodsSupported          []string `json:"token_endpoint_auth_methods_supported"`
	UserinfoEndpoint                           string   `json:"userinfo_endpoint"`
}

// clientAuthMethods are the client authentication methods of the token,
// introspection and revocation endpoints (Authenticate).
var clientAuthMethods = []string{"client_secret_post", "client_secret_basic"}

// publicAuthMethods are those of the token and revocation endpoints, which public
// clients use with their client_id only (`none`, public.go).
var publicAuthMethods = []string{"client_secret_post", "client_secret_basic", TokenAuthMethodNone}

// Discovery returns the provider's metadata.
func (s *Service) Discovery() *Discovery {
	iss := s.issuer
	d := &Discovery{
		Issuer:                iss,
		ACRValuesSupported:    []string{ACRPalm},
		AuthorizationEndpoint: iss + "/authorize",
		TokenEndpoint:         iss + "/token",
		UserinfoEndpoint:      iss + "/userinfo",
		IntrospectionEndpoint: iss + "/introspect",
		RevocationEndpoint:    iss + "/revoke",
		IntrospectionEndpointAuthMethodsSupported:  clientAuthMethods,
		RevocationEndpointAuthMethodsSupported:     publicAuthMethods,
		JWKSURI:                                    iss + "/jwks",
		ResponseTypesSupported:                     []string{"code"},
		ResponseModesSupported:                     slices.Clone(ResponseModes),
		GrantTypesSupported:                        slices.Clone(GrantTypes),
		SubjectTypesSupported:                      []string{"pairwise"},
		IDTokenSigningAlgValuesSupported:           slices.Clone(IDTokenAlgs),
		ScopesSupported:                            slices.Concat([]string{ScopeOpenID, ScopeOfflineAccess}, StandardScopes),
		ClaimsSupported:                            []string{"sub", "iss", "aud", "exp", "iat", "auth_time", "nonce", "acr", "amr", "azp", "sid", "preferred_username"},
		TokenEndpointAuthMethodsSupported:          publicAuthMethods,
		CodeChallengeMethodsSupported:              []string{"S256"},
		PromptValuesSupported:                      slices.Clone(promptValues),
		RequestParameterSupported:                  false,
		RequestURIParameterSupported:               false,
		EndSessionEndpoint:                         iss + "/logout",
		AuthorizationResponseISSParameterSupported: true,
		ClaimsParameterSupported:                   false,
		BackchannelLogoutSupported:                 true,
		BackchannelLogoutSessionSupported:          true,
		ClientIDMetadataDocumentSupported:          s.clients.metadata != nil,
	}
	if s.clients.reg.Open {
		d.RegistrationEndpoint = iss + "/register"
	}
	return d
}
