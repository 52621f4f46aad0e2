package oidc

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// CheckClients checks configured clients (the one definition of the rules;
// NewService refuses what it refuses, and a config's validation may call it
// early; dev allows http redirect URIs on any host): an id given once, a secret or a secret hash (not both, the hash well
// formed), an ID token algorithm palmgate signs with, absolute redirect and post-logout redirect URIs without a fragment, scope tokens including
// openid, and resources that are absolute URIs without a fragment. The messages
// name the Caddyfile option.
func CheckClients(clients []Client, dev bool) error {
	seen := map[string]bool{}
	for _, c := range clients {
		if c.ID == "" {
			return errors.New("client: a client_id is required")
		}
		if seen[c.ID] {
			return fmt.Errorf("client %s: configured twice", c.ID)
		}
		seen[c.ID] = true
		if err := checkPublicClient(c, dev); err != nil {
			return err
		}
		switch {
		case c.Public:
		case c.Secret == "" && c.SecretHash == "":
			return fmt.Errorf("client %s: secret (or secret_hash) is required", c.ID)
		case c.Secret != "" && c.SecretHash != "":
			return fmt.Errorf("client %s: secret and secret_hash are exclusive; give one", c.ID)
		case c.SecretHash != "":
			if err := ParseSecretHash(c.SecretHash); err != nil {
				return fmt.Errorf("client %s: secret_hash: %w", c.ID, err)
			}
		}
		// The dynamic clients' check: https, or http on loopback (anywhere in dev mode).
		for _, ru := range c.RedirectURIs {
			if err := CheckClientRedirectURI("redirect_uri", ru, dev, c.Public); err != nil {
				return fmt.Errorf("client %s: %w", c.ID, err)
			}
		}
		for _, ru := range c.PostLogoutRedirectURIs {
			if err := CheckClientRedirectURI("post_logout_redirect_uri", ru, dev, c.Public); err != nil {
				return fmt.Errorf("client %s: %w", c.ID, err)
			}
		}
		if c.BackchannelLogoutURI != "" {
			if err := CheckBackchannelLogoutURI(c.BackchannelLogoutURI, true); err != nil {
				return fmt.Errorf("client %s: %w", c.ID, err)
			}
		}
		for _, sc := range c.Scopes {
			if !ValidScope(sc) {
				return fmt.Errorf("client %s: scopes: %q is not a scope token", c.ID, sc)
			}
		}
		if len(c.Scopes) > 0 && !slices.Contains(c.Scopes, ScopeOpenID) {
			return fmt.Errorf("client %s: scopes must include openid (every login asks for it)", c.ID)
		}
		if c.IDTokenAlg != "" && !slices.Contains(IDTokenAlgs, c.IDTokenAlg) {
			return fmt.Errorf("client %s: id_token_signed_response_alg %q must be one of %s", c.ID, c.IDTokenAlg, strings.Join(IDTokenAlgs, ", "))
		}
		if c.AccessTokenAudience != "" && !slices.Contains(AccessTokenAudiences, c.AccessTokenAudience) {
			return fmt.Errorf("client %s: access_token_audience %q must be one of %s", c.ID, c.AccessTokenAudience, strings.Join(AccessTokenAudiences, ", "))
		}
		for _, r := range c.Resources {
			if !ValidResource(r) {
				return fmt.Errorf("client %s: resources: %q must be an absolute URI without a fragment", c.ID, r)
			}
		}
	}
	return nil
}
