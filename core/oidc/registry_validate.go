package oidc

import (
	"net"
	"net/url"
	"strings"
	"unicode/utf8"
)

// validateSpec checks and normalises a spec's fields.
func (s *Service) validateSpec(spec *ClientSpec) error {
	if spec.Name != nil {
		n := strings.TrimSpace(*spec.Name)
		if n == "" || utf8.RuneCountInString(n) > MaxClientNameLen || !utf8.ValidString(n) || strings.ContainsAny(n, "\x00\r\n") {
			return clientErr(ErrClientInvalid, "name: 1 to %d characters on one line", MaxClientNameLen)
		}
		if err := s.checkClientName(n); err != nil {
			return err
		}
		spec.Name = &n
	}
	if spec.RedirectURIs != nil {
		if len(spec.RedirectURIs) == 0 || len(spec.RedirectURIs) > MaxRedirectURIs {
			return clientErr(ErrClientInvalid, "redirect_uris: 1 to %d URIs", MaxRedirectURIs)
		}
		seen := map[string]bool{}
		var uris []string
		for _, u := range spec.RedirectURIs {
			u = strings.TrimSpace(u)
			if err := ValidateRedirectURI(u, s.devRedirects); err != nil {
				return err
			}
			if !seen[u] {
				seen[u] = true
				uris = append(uris, u)
			}
		}
		spec.RedirectURIs = uris
	}
	if spec.Sector != nil {
		sec := strings.TrimSpace(*spec.Sector)
		if len(sec) > MaxSectorLen || !utf8.ValidString(sec) || strings.ContainsAny(sec, "\x00\r\n") {
			return clientErr(ErrClientInvalid, "sector: at most %d characters on one line", MaxSectorLen)
		}
		spec.Sector = &sec
	}
	return s.validateLogoutAndAlg(spec)
}

// ValidateRedirectURI checks a dynamic client's redirect URI: absolute, no fragment,
// https, or http for a loopback host (any mode) or anywhere when dev is set.
func ValidateRedirectURI(uri string, dev bool) error {
	if uri == "" || len(uri) > MaxRedirectURILen {
		return clientErr(ErrClientInvalid, "redirect_uri: 1 to %d characters", MaxRedirectURILen)
	}
	u, err := url.Parse(uri)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return clientErr(ErrClientInvalid, "redirect_uri %.200q: must be an absolute URL", uri)
	}
	if u.Fragment != "" || strings.Contains(uri, "#") {
		return clientErr(ErrClientInvalid, "redirect_uri %.200q: must not have a fragment", uri)
	}
	if u.User != nil {
		return clientErr(ErrClientInvalid, "redirect_uri %.200q: must not carry user information", uri)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !dev && !loopbackHost(u.Hostname()) {
			return clientErr(ErrClientInvalid, "redirect_uri %.200q: must use https (http only for localhost and loopback addresses)", uri)
		}
	default:
		return clientErr(ErrClientInvalid, "redirect_uri %.200q: scheme must be https (or http for loopback hosts)", uri)
	}
	return nil
}

func loopbackHost(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
