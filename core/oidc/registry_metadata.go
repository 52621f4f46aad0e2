package oidc

import (
	"errors"
	"slices"
	"strings"

	"github.com/palmgate/palmgate/core/fault"
)

// validateLogoutAndAlg checks and normalises a spec's post-logout redirect URIs
// (the rules of redirect URIs, at most MaxRedirectURIs, none required), its ID
// token algorithm (one of IDTokenAlgs; "" means RS256) and its access token
// audience (one of AccessTokenAudiences; "" means AudienceBaseURL).
func (r *Clients) validateLogoutAndAlg(spec *ClientSpec) error {
	if spec.PostLogoutRedirectURIs != nil {
		if len(spec.PostLogoutRedirectURIs) > MaxRedirectURIs {
			return clientErr(ErrClientInvalid, "post_logout_redirect_uris: at most %d URIs", MaxRedirectURIs)
		}
		uris := []string{}
		for _, u := range spec.PostLogoutRedirectURIs {
			u = strings.TrimSpace(u)
			if err := ValidateRedirectURI(u, r.devRedirects); err != nil {
				var ce *fault.Error
				if !errors.As(err, &ce) {
					return err
				}
				if strings.HasPrefix(ce.Message, "redirect_uri") {
					return clientErr(ce.Kind, "post_logout_%s", ce.Message)
				}
				return clientErr(ce.Kind, "post_logout_redirect_uri: %s", ce.Message)
			}
			if !slices.Contains(uris, u) {
				uris = append(uris, u)
			}
		}
		spec.PostLogoutRedirectURIs = uris
	}
	if spec.IDTokenAlg != nil {
		alg := strings.TrimSpace(*spec.IDTokenAlg)
		if alg != "" && !slices.Contains(IDTokenAlgs, alg) {
			return clientErr(ErrClientInvalid, "id_token_signed_response_alg %.20q: must be one of %s", alg, strings.Join(IDTokenAlgs, ", "))
		}
		spec.IDTokenAlg = &alg
	}
	if spec.BackchannelLogoutURI != nil {
		// The syntax here; https for a developer's or self-registered client in
		// create and Update (checkBackchannelOwner), which know whose it is.
		u := strings.TrimSpace(*spec.BackchannelLogoutURI)
		if u != "" {
			if err := CheckBackchannelLogoutURI(u, true); err != nil {
				return err
			}
		}
		spec.BackchannelLogoutURI = &u
	}
	if spec.AccessTokenAudience != nil {
		aud := strings.TrimSpace(*spec.AccessTokenAudience)
		if aud != "" && !slices.Contains(AccessTokenAudiences, aud) {
			return clientErr(ErrClientInvalid, "access_token_audience %.20q: must be one of %s", aud, strings.Join(AccessTokenAudiences, ", "))
		}
		spec.AccessTokenAudience = &aud
	}
	return nil
}

// orEmpty is list, or an empty list for nil (JSON [] rather than null).
func orEmpty(list []string) []string {
	if list == nil {
		return []string{}
	}
	return slices.Clone(list)
}
