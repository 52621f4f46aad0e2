package oidc

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// validateSpec checks and normalises a spec's fields.
func (r *Clients) validateSpec(spec *ClientSpec) error {
	if spec.Name != nil {
		n := strings.TrimSpace(*spec.Name)
		if n == "" || utf8.RuneCountInString(n) > MaxClientNameLen || !utf8.ValidString(n) || strings.ContainsAny(n, "\x00\r\n") {
			return clientErr(ErrClientInvalid, "name: 1 to %d characters on one line", MaxClientNameLen)
		}
		if err := r.checkName(n); err != nil {
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
			if err := ValidateRedirectURI(u, r.devRedirects); err != nil {
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
	if err := r.validateOrigins(spec); err != nil {
		return err
	}
	return r.validateLogoutAndAlg(spec)
}

// ValidateRedirectURI checks a dynamic client's redirect URI (CheckRedirectURI):
// http only for a loopback host, or anywhere when dev is set; a private-use scheme
// one (CheckClientRedirectURI) too, which only a public client may have: Create
// and Update check that against the client (checkPrivateUseOwner).
func ValidateRedirectURI(uri string, dev bool) error {
	return CheckClientRedirectURI("redirect_uri", uri, dev, true)
}

// CheckRedirectURI is the one check of every redirect URI, static or dynamic, and of
// post-logout redirect URIs; option names the field in the error. The URI must be
// an absolute http(s) URL that parses, at most MaxRedirectURILen long, with no
// space, control or invisible character, no wildcard (*), no user information, a
// host name or IP address, a port (if any) from 1 to 65535, and no fragment; https,
// or http on a loopback host, or on any host when allowHTTP is set (dev mode, and
// static clients, whose operator chose them).
func CheckRedirectURI(option, uri string, allowHTTP bool) error {
	if uri == "" || len(uri) > MaxRedirectURILen {
		return clientErr(ErrClientInvalid, "%s: 1 to %d characters", option, MaxRedirectURILen)
	}
	if i := strings.IndexFunc(uri, func(r rune) bool {
		return r == utf8.RuneError || unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
	}); i >= 0 {
		return clientErr(ErrClientInvalid, "%s %.200q: must not contain spaces, control or invisible characters", option, uri)
	}
	if strings.Contains(uri, "*") {
		return clientErr(ErrClientInvalid, "%s %.200q: must not contain a wildcard (*): redirect URIs match exactly", option, uri)
	}
	u, err := url.Parse(uri)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return clientErr(ErrClientInvalid, "%s %.200q: must be an absolute URL", option, uri)
	}
	if u.Fragment != "" || strings.Contains(uri, "#") {
		return clientErr(ErrClientInvalid, "%s %.200q: must not have a fragment", option, uri)
	}
	if u.User != nil {
		return clientErr(ErrClientInvalid, "%s %.200q: must not carry user information", option, uri)
	}
	if !validHost(u.Hostname()) {
		return clientErr(ErrClientInvalid, "%s %.200q: the host must be a DNS name (letters, digits, hyphens; IDNs in their xn-- form) or an IP address", option, uri)
	}
	if port := u.Port(); strings.HasSuffix(u.Host, ":") || (port != "" && !validPort(port)) {
		return clientErr(ErrClientInvalid, "%s %.200q: the port must be a number from 1 to 65535", option, uri)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !allowHTTP && !loopbackHost(u.Hostname()) {
			return clientErr(ErrClientInvalid, "%s %.200q: must use https (http only for localhost and loopback addresses)", option, uri)
		}
	default:
		return clientErr(ErrClientInvalid, "%s %.200q: scheme must be https (or http for loopback hosts)", option, uri)
	}
	return nil
}

// validHost: an IP address, or dot-separated labels of ASCII letters, digits,
// hyphens and underscores, none empty and none starting or ending with a hyphen.
func validHost(host string) bool {
	if net.ParseIP(host) != nil {
		return true
	}
	if host == "" || len(host) > 253 {
		return false
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range []byte(label) {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

func validPort(port string) bool {
	n, err := strconv.Atoi(port)
	return err == nil && n >= 1 && n <= 65535 && port[0] != '0'
}

func loopbackHost(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
