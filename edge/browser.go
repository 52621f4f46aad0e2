package edge

import (
	"crypto/rand"
	"encoding/base64"
	"net"
	"net/http"
	"strings"

	"github.com/palmgate/palmgate/core/oidc"
)

// A login is bound to the browser that started it by a cookie of its own, named
// after the authorization request, so that logins a browser starts at the same
// moment (two tabs, or a page with two sign-in buttons) do not overwrite each
// other's. It lives as long as the login can, and is cleared when the code goes
// back.

// loginCookieName is the cookie of login id: `__Host-` prefixed on an https
// issuer, so that no other host or path can set it.
func (s *Server) loginCookieName(id string) string {
	if len(id) > 12 {
		id = id[:12] // 48 random bits of the uuid: unique among one browser's logins
	}
	if s.secureCookies() {
		return "__Host-palmgate_login_" + id
	}
	return "palmgate_login_" + id
}

func (s *Server) secureCookies() bool { return strings.HasPrefix(s.issuer, "https://") }

// loginBinding returns the binding secret the browser holds for login id, or ""
// when it sent none of the right form.
func (s *Server) loginBinding(r *http.Request, id string) string {
	c, err := r.Cookie(s.loginCookieName(id))
	if err != nil || len(c.Value) != 43 {
		return ""
	}
	if _, err := base64.RawURLEncoding.DecodeString(c.Value); err != nil {
		return ""
	}
	return c.Value
}

// newBinding returns a fresh binding secret: 256 random bits.
func newBinding() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// setLoginCookie gives the browser the binding of login id for maxAge seconds
// (-1 clears it).
func (s *Server) setLoginCookie(w http.ResponseWriter, id, binding string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: s.loginCookieName(id), Value: binding, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: s.secureCookies(), SameSite: http.SameSiteLaxMode,
	})
}

// browserOf describes the browser of r for the person's app.
func (s *Server) browserOf(r *http.Request, binding string) oidc.Browser {
	return oidc.Browser{Binding: binding, IP: s.clientIP(r), Summary: userAgentSummary(r.UserAgent()), Address: s.limiter.address(r),
		Session: s.sessionID(r)}
}

// userAgentSummary says in a few words what browser and system a User-Agent
// names ("Chrome on Windows"), so a person can tell whether a login request came
// from their own computer. It knows the common ones only; it is for display.
func userAgentSummary(ua string) string {
	if len(ua) > 512 {
		ua = ua[:512]
	}
	browser := "An unknown browser"
	for _, b := range []struct{ token, name string }{
		{"Edg/", "Edge"}, {"OPR/", "Opera"}, {"SamsungBrowser/", "Samsung Internet"},
		{"Firefox/", "Firefox"}, {"FxiOS/", "Firefox"}, {"CriOS/", "Chrome"},
		{"Chrome/", "Chrome"}, {"Safari/", "Safari"}, {"curl/", "curl"},
	} {
		if strings.Contains(ua, b.token) {
			browser = b.name
			break
		}
	}
	system := ""
	for _, s := range []struct{ token, name string }{
		{"Android", "Android"}, {"iPhone", "iPhone"}, {"iPad", "iPad"},
		{"Windows", "Windows"}, {"Mac OS X", "macOS"}, {"CrOS", "ChromeOS"}, {"Linux", "Linux"},
	} {
		if strings.Contains(ua, s.token) {
			system = s.name
			break
		}
	}
	if system == "" {
		return browser
	}
	return browser + " on " + system
}

// onPhone reports whether r comes from a phone or tablet browser, which is shown
// the app link (same-device login) instead of a QR code to scan.
func onPhone(r *http.Request) bool {
	ua := r.UserAgent()
	return strings.Contains(ua, "Mobile") || strings.Contains(ua, "Android") || strings.Contains(ua, "iPad")
}

// addressKey is the client address as the rate limit and the per-address counts
// see it: an IPv4 address, or an IPv6 address's /64 (one subscriber's network).
func addressKey(ip string) string {
	parsed := net.ParseIP(ip)
	if parsed == nil || parsed.To4() != nil {
		return ip
	}
	return parsed.Mask(net.CIDRMask(64, 128)).String() + "/64"
}
