// Package brand is the operator's brand on palmgate's pages (the login,
// registration, consent, signed-out, agents and portal pages, and any page to
// come): a name, a logo and an accent colour, checked once at configuration so
// that a page can print them without further thought. Every page's data carries
// one Brand (field Brand) and its template calls {{template "brand" .Brand}}
// (edge/pages/base.html); the CSP of a page adds ImgSrc for the logo.
package brand

import (
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/url"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameRunes bounds the brand's name: it fits one line of a phone's screen.
const MaxNameRunes = 64

// MaxLogoURLBytes bounds the logo's URL.
const MaxLogoURLBytes = 2048

// Default is palmgate's own name, shown when the operator names no brand.
const Default = "palmgate"

// Brand is what the operator shows of themselves on the pages. The zero Brand is
// palmgate's own look.
type Brand struct {
	// Name replaces "palmgate" in the pages' header and titles.
	Name string `json:"name,omitempty"`
	// LogoURL is an absolute https URL of an image shown beside the name (http
	// only on a loopback host, or in dev mode).
	LogoURL string `json:"logo_url,omitempty"`
	// Color is the accent colour, a CSS hex colour (#0b5fff or #05f).
	Color string `json:"color,omitempty"`
}

var hexColor = regexp.MustCompile(`^#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})$`)

// Validate checks the brand; allowHTTP admits an http logo URL on any host (dev
// mode). Each message names the field at fault.
func (b Brand) Validate(allowHTTP bool) error {
	if b.Name != "" {
		if !utf8.ValidString(b.Name) || utf8.RuneCountInString(b.Name) > MaxNameRunes {
			return fmt.Errorf("name: must be valid UTF-8 of at most %d characters", MaxNameRunes)
		}
		if strings.TrimSpace(b.Name) != b.Name {
			return errors.New("name: must not start or end with spaces")
		}
		for _, r := range b.Name {
			if !unicode.IsPrint(r) {
				return fmt.Errorf("name: %q is not printable", r)
			}
		}
	}
	if b.LogoURL != "" {
		if err := checkLogoURL(b.LogoURL, allowHTTP); err != nil {
			return fmt.Errorf("logo_url: %w", err)
		}
	}
	if b.Color != "" && !hexColor.MatchString(b.Color) {
		return fmt.Errorf("color: must be a CSS hex colour such as #0b5fff or #05f, got %q", b.Color)
	}
	return nil
}

func checkLogoURL(raw string, allowHTTP bool) error {
	if len(raw) > MaxLogoURLBytes {
		return fmt.Errorf("longer than %d bytes", MaxLogoURLBytes)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a URL")
	}
	switch {
	case u.Host == "" || u.Hostname() == "" || !u.IsAbs():
		return fmt.Errorf("must be an absolute URL, got %q", raw)
	case u.User != nil:
		return errors.New("must not carry credentials")
	case u.Fragment != "":
		return errors.New("must not have a fragment")
	case strings.ContainsAny(raw, " \t\r\n'\";,"):
		return errors.New("must not contain spaces, quotes, commas or semicolons")
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && (allowHTTP || loopback(u.Hostname())):
		return nil
	case u.Scheme == "http":
		return errors.New("must be https (http only on a loopback host or in dev mode)")
	}
	return fmt.Errorf("must be https, got scheme %q", u.Scheme)
}

func loopback(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// DisplayName is the name the pages show: the brand's, or palmgate's.
func (b Brand) DisplayName() string {
	if b.Name == "" {
		return Default
	}
	return b.Name
}

// Own reports whether the page shows palmgate's own brand (no name set).
func (b Brand) Own() bool { return b.Name == "" }

// ImgSrc is the CSP source the logo needs, its origin ("https://cdn.example"),
// or "" without a logo. The CSP admits this origin and no other.
func (b Brand) ImgSrc() string {
	if b.LogoURL == "" {
		return ""
	}
	u, err := url.Parse(b.LogoURL)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// AccentCSS is the style rule that sets the pages' accent colour, or "" for
// palmgate's own. Only a validated hex colour ever reaches it.
func (b Brand) AccentCSS() template.CSS {
	if !hexColor.MatchString(b.Color) {
		return ""
	}
	return template.CSS(":root{--accent:" + b.Color + "}")
}

// WithImgSrc adds the logo's origin to a CSP img-src list (sources separated by
// spaces, or "" for none): the directive's value, or "" when there is none.
func (b Brand) WithImgSrc(sources string) string {
	o := b.ImgSrc()
	switch {
	case o == "":
		return sources
	case sources == "":
		return o
	}
	return sources + " " + o
}
