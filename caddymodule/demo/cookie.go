package demo

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// The login cookie carries one login attempt from /demo/login to /demo/callback.
const (
	cookieName = "palmgate_demo_login"
	cookieTTL  = 10 * time.Minute
	// maxCookieLen bounds what openState decodes; a real one is about 250 bytes.
	maxCookieLen = 1 << 10
)

// cookieKey is the HMAC key of login cookies: random, once per process, so a
// config reload keeps logins in flight and a restart simply ends them. With several
// instances, a demo login whose callback reaches another instance fails ("Login
// expired", 400): the cookie only carries the demo's own OAuth state, so
// refusing it admits nothing. Pin /demo to one instance if that matters.
var cookieKey = sync.OnceValue(func() []byte {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // never fails (crypto/rand)
	return key
})

// loginState is what /demo/login hands to /demo/callback through the browser: the
// OAuth state, the OpenID nonce and the PKCE verifier of one login attempt, with
// its expiry. The cookie is signed, not encrypted: it is HttpOnly, lives for
// minutes, and the verifier is useless without the code sent to the same browser.
type loginState struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Expires  int64  `json:"e"` // Unix seconds
}

// Errors of openState.
var (
	errBadCookie     = errors.New("the login cookie is malformed or was not made by this server")
	errExpiredCookie = errors.New("the login cookie has expired")
)

// sealState encodes st as a cookie value: base64url(JSON) "." base64url(HMAC).
func sealState(key []byte, st loginState) (string, error) {
	payload, err := json.Marshal(st)
	if err != nil {
		return "", err
	}
	body := base64.RawURLEncoding.EncodeToString(payload)
	return body + "." + base64.RawURLEncoding.EncodeToString(cookieMAC(key, body)), nil
}

// openState checks a cookie value made by sealState with key and returns its
// login state unless it has expired at now.
func openState(key []byte, value string, now time.Time) (loginState, error) {
	var st loginState
	if len(value) > maxCookieLen {
		return st, errBadCookie
	}
	body, sig, ok := strings.Cut(value, ".")
	if !ok {
		return st, errBadCookie
	}
	mac, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(mac, cookieMAC(key, body)) {
		return st, errBadCookie
	}
	payload, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || json.Unmarshal(payload, &st) != nil || st.State == "" || st.Nonce == "" || st.Verifier == "" {
		return loginState{}, errBadCookie
	}
	if now.Unix() >= st.Expires {
		return loginState{}, errExpiredCookie
	}
	return st, nil
}

// cookieMAC is the HMAC-SHA256 of the cookie's name and body, so a value signed
// for another purpose with the same key is never accepted here.
func cookieMAC(key []byte, body string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(cookieName))
	m.Write([]byte{0})
	m.Write([]byte(body))
	return m.Sum(nil)
}

// loginCookie is the cookie of a new login attempt (value "" deletes it).
func (d *Demo) loginCookie(value string) *http.Cookie {
	c := &http.Cookie{
		Name:     cookieName,
		Value:    value,
		Path:     pathHome,
		MaxAge:   int(cookieTTL / time.Second),
		Secure:   d.secure,
		HttpOnly: true,
		SameSite: http.SameSiteLaxMode,
	}
	if value == "" {
		c.MaxAge = -1
	}
	return c
}

// callbackFailure is a callback the demo refuses, as the person sees it.
type callbackFailure struct {
	Status  int
	Title   string
	Message string
}

// checkCallback checks the parameters palmgate sent to the callback against the
// login attempt's state and returns the authorization code. The state is checked
// first: an error answer with a foreign state is as untrusted as a code.
func checkCallback(q url.Values, st loginState) (string, *callbackFailure) {
	if !hmac.Equal([]byte(q.Get("state")), []byte(st.State)) {
		return "", &callbackFailure{http.StatusBadRequest, "Login refused",
			"The state parameter does not match this browser's login attempt: the callback was not the answer to the login started here (a forged or replayed link, or a login started in another tab). Start again."}
	}
	if e := q.Get("error"); e != "" {
		if e == "access_denied" {
			return "", &callbackFailure{http.StatusBadRequest, "Login was declined",
				"The palm scan was declined or the request expired (access_denied). Nothing was shared with this app."}
		}
		return "", &callbackFailure{http.StatusBadRequest, "Login failed", receivedError(q)}
	}
	code := q.Get("code")
	if code == "" {
		return "", &callbackFailure{http.StatusBadRequest, "Login failed", "The callback carries neither a code nor an error."}
	}
	return code, nil
}

// receivedError says which error palmgate sent to the callback: its error and
// error_description, each cut to a bounded length (the page escapes them).
func receivedError(q url.Values) string {
	msg := "palmgate answered error " + bounded(q.Get("error"), 64)
	if desc := q.Get("error_description"); desc != "" {
		msg += ": " + bounded(desc, 300)
	}
	return msg + "."
}

// bounded returns s cut to at most n runes.
func bounded(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
