package oidc

import (
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Private-use URI scheme redirect URIs (RFC 8252 7.1): a native app (a desktop
// or mobile app, an MCP client such as Cursor's `cursor://...`) registers a URI
// of a scheme the operating system hands to it, such as
// `com.example.app:/oauth2redirect`. palmgate allows them for public clients only
// (RFC 8252 8.4: a native app is public; its code is bound by PKCE S256, which a
// public client must send), matched exactly like every redirect URI (RFC 9700
// 2.1), and only in query response mode (no form_post page posts to them).
//
// No dot is required in the scheme: RFC 8252 7.1 says SHOULD (reverse DNS), but
// the MCP clients that register themselves use single-label schemes (`cursor`,
// `vscode`, `claude`), and a dotted scheme proves nothing either: any app may
// claim any scheme (RFC 8252 8.6), which is why PKCE and, for a self-registered
// client, the consent screen's notice are the defences, not the name.
//
// Refused: a scheme a browser runs, loads as content or fetches over the network
// itself (javascript, data, blob, file, ws ...), a browser's internal pages and
// extensions, a browser's hand-off schemes that open a web URL in it
// (x-safari-https, googlechrome, firefox, opera-https, microsoft-edge-https,
// web+*), and schemes of other programs than an app's own (mailto, tel ...),
// none of which is a redirect target of an app.

// refusedSchemes are the schemes no redirect URI may use besides http(s).
var refusedSchemes = map[string]bool{
	"javascript": true, "vbscript": true, "livescript": true, "data": true, "blob": true,
	"file": true, "filesystem": true, "about": true, "view-source": true, "jar": true,
	"ws": true, "wss": true, "ftp": true, "ftps": true, "sftp": true, "gopher": true,
	"chrome": true, "chrome-untrusted": true, "chrome-search": true, "chrome-error": true, "devtools": true,
	"edge": true, "brave": true, "opera": true, "vivaldi": true, "resource": true, "moz-icon": true,
	"res": true, "ms-appx": true, "ms-appx-web": true, "ms-browser-extension": true, "wyciwyg": true,
	"intent": true, "android-app": true, "content": true, "urn": true, "cid": true, "mid": true,
	"mailto": true, "tel": true, "sms": true, "callto": true, "news": true, "nntp": true,
	"ldap": true, "ldaps": true, "telnet": true, "ssh": true, "smb": true, "nfs": true,
	"localhost": true,
	// Operating system handlers that fetch and open or run what the URI names
	// (search-ms, ms-msdt: CVE-2022-30190, jnlp, itms-services), and every
	// ms-* one (refusedScheme).
	"search": true, "search-ms": true, "shell": true, "jnlp": true, "itms-services": true,
	"microsoft-edge": true, "microsoft-edge-holographic": true,
	// Browser hand-off schemes: each opens the web URL it carries in a browser
	// (x-safari-https://evil.example/ is https://evil.example/), so the code
	// would go to a web site, not to an app; web+* are a web page's own handlers
	// (registerProtocolHandler).
	"x-safari-https": true, "x-safari-http": true, "googlechrome": true, "googlechromes": true,
	"firefox": true, "opera-http": true, "opera-https": true,
	"microsoft-edge-https": true, "microsoft-edge-http": true,
}

// refusedScheme reports whether no redirect URI may use scheme (lowercase).
func refusedScheme(scheme string) bool {
	return refusedSchemes[scheme] || strings.HasSuffix(scheme, "-extension") || strings.HasPrefix(scheme, "ms-") || strings.HasPrefix(scheme, "web+")
}

// uriScheme returns the scheme of uri (lowercase) and whether it has one that
// is syntactically valid (RFC 3986 3.1: a letter, then letters, digits, + - .).
func uriScheme(uri string) (string, bool) {
	scheme, _, ok := strings.Cut(uri, ":")
	if !ok || scheme == "" || !('a' <= scheme[0]|0x20 && scheme[0]|0x20 <= 'z') {
		return "", false
	}
	for _, c := range []byte(scheme) {
		if !('a' <= c|0x20 && c|0x20 <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.') {
			return "", false
		}
	}
	return strings.ToLower(scheme), true
}

// PrivateUseRedirect reports whether uri has a syntactically valid scheme other
// than http and https: a private-use URI scheme redirect URI if it passes
// checkPrivateUse.
func PrivateUseRedirect(uri string) bool {
	scheme, ok := uriScheme(uri)
	return ok && scheme != "http" && scheme != "https"
}

// checkPrivateUse checks a private-use URI scheme redirect URI (PrivateUseRedirect):
// at most MaxRedirectURILen long, with no space, control or invisible character,
// no wildcard, no fragment, no user information, a path or an authority after
// `scheme:/` (not the opaque form), and a
// scheme that is not refused (refusedScheme).
func checkPrivateUse(option, uri string) error {
	if len(uri) > MaxRedirectURILen {
		return clientErr(ErrClientInvalid, "%s: 1 to %d characters", option, MaxRedirectURILen)
	}
	if i := strings.IndexFunc(uri, func(r rune) bool {
		return r == utf8.RuneError || unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
	}); i >= 0 {
		return clientErr(ErrClientInvalid, "%s %.200q: must not contain spaces, control or invisible characters", option, uri)
	}
	scheme, _ := uriScheme(uri)
	if refusedScheme(scheme) {
		return clientErr(ErrClientInvalid, "%s %.200q: the scheme %s is not an app's own: use https, http on a loopback host, or a private-use scheme of the app (RFC 8252 7.1)", option, uri, scheme)
	}
	if strings.Contains(uri, "*") {
		return clientErr(ErrClientInvalid, "%s %.200q: must not contain a wildcard (*): redirect URIs match exactly", option, uri)
	}
	if strings.Contains(uri, "#") {
		return clientErr(ErrClientInvalid, "%s %.200q: must not have a fragment", option, uri)
	}
	// scheme:/path or scheme://authority/path: not the opaque form (scheme:x),
	// which is mostly a host:port mistaken for a URI (example.com:443/cb).
	u, err := url.Parse(uri)
	if err != nil || u.Opaque != "" || (u.Host == "" && (u.Path == "" || u.Path == "/")) {
		return clientErr(ErrClientInvalid, "%s %.200q: must be scheme:/path or scheme://host/path, such as com.example.app:/oauth2redirect", option, uri)
	}
	if u.User != nil {
		return clientErr(ErrClientInvalid, "%s %.200q: must not carry user information", option, uri)
	}
	return nil
}

// CheckClientRedirectURI checks a redirect URI or post-logout redirect URI of a
// client: CheckRedirectURI's rules for http(s); for a public client, a private-use
// URI scheme one (checkPrivateUse) besides.
func CheckClientRedirectURI(option, uri string, allowHTTP, public bool) error {
	if !PrivateUseRedirect(uri) {
		return CheckRedirectURI(option, uri, allowHTTP)
	}
	if err := checkPrivateUse(option, uri); err != nil {
		return err
	}
	if !public {
		return clientErr(ErrClientInvalid, "%s %.200q: a private-use scheme (RFC 8252 7.1) is for a public client (a native app): this client has a secret, so it needs https (or http on a loopback host)", option, uri)
	}
	return nil
}

// checkPrivateUseOwner refuses private-use scheme redirect URIs for a client that
// is not public (a portal or admin update, whose spec does not say).
func checkPrivateUseOwner(public bool, lists ...[]string) error {
	for i, list := range lists {
		option := "redirect_uri"
		if i > 0 {
			option = "post_logout_redirect_uri"
		}
		for _, u := range list {
			if !PrivateUseRedirect(u) {
				continue // validated by validateSpec (a stored one by the rules of its day: an update of the name must not fail on it)
			}
			if err := CheckClientRedirectURI(option, u, true, public); err != nil {
				return err
			}
		}
	}
	return nil
}

// RedirectDestination is how a page names where a redirect URI leads: the host
// (and port) of an http(s) one, the scheme and authority of a private-use one
// ("cursor://anysphere.cursor-retrieval", "com.example.app:"), so that a person is
// told an app, not a web site, is next.
func RedirectDestination(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return uri
	}
	if !PrivateUseRedirect(uri) {
		if u.Host != "" {
			return u.Host
		}
		return uri
	}
	if u.Host != "" {
		return u.Scheme + "://" + u.Host
	}
	return u.Scheme + ":"
}
