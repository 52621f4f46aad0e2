package portal

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// A developer's session is a signed cookie, not a store record: every instance on
// the store checks it with the same key (oidc.Service.DerivedKey), and it ends when
// it expires (SessionTTL after sign-in) or when the developer signs out (the cookie
// is dropped). It holds the developer's humanId, which only their browser sees
// (HttpOnly), and a random session id that keys the CSRF token.
type session struct {
	HumanID string `json:"h"`
	ID      string `json:"s"`
	Expires int64  `json:"e"`
}

// loginState is the cookie of a sign-in under way: its OAuth state and PKCE
// verifier, bound to the browser that started it.
type loginState struct {
	State    string `json:"st"`
	Verifier string `json:"v"`
	Expires  int64  `json:"e"`
}

func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b)
}

func (p *Portal) mac(purpose string, data []byte) []byte {
	m := hmac.New(sha256.New, p.key)
	m.Write([]byte(purpose))
	m.Write([]byte{0})
	m.Write(data)
	return m.Sum(nil)
}

// seal encodes v as base64url(JSON) "." base64url(HMAC), under purpose.
func (p *Portal) seal(purpose string, v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b) + "." + base64.RawURLEncoding.EncodeToString(p.mac(purpose, b))
}

// open checks and decodes a sealed value.
func (p *Portal) open(purpose, sealed string, v any) bool {
	body, sig, ok := strings.Cut(sealed, ".")
	if !ok || len(sealed) > 4096 {
		return false
	}
	b, err1 := base64.RawURLEncoding.DecodeString(body)
	s, err2 := base64.RawURLEncoding.DecodeString(sig)
	if err1 != nil || err2 != nil || !hmac.Equal(s, p.mac(purpose, b)) {
		return false
	}
	return json.Unmarshal(b, v) == nil
}

// cookieName is name with the __Host- prefix on https (Secure, Path=/, no Domain).
func (p *Portal) cookieName(name string) string {
	if p.secure {
		return "__Host-" + name
	}
	return name
}

func (p *Portal) setCookie(w http.ResponseWriter, name, value string, maxAge time.Duration) {
	http.SetCookie(w, &http.Cookie{
		Name: p.cookieName(name), Value: value, Path: "/", MaxAge: int(maxAge / time.Second),
		HttpOnly: true, Secure: p.secure, SameSite: http.SameSiteLaxMode,
	})
}

func (p *Portal) clearCookie(w http.ResponseWriter, name string) {
	http.SetCookie(w, &http.Cookie{
		Name: p.cookieName(name), Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: p.secure, SameSite: http.SameSiteLaxMode,
	})
}

const (
	sessionCookie = "palmgate_portal"
	loginCookie   = "palmgate_portal_login"
	loginTTL      = 15 * time.Minute
)

// session returns the request's live session, or nil.
func (p *Portal) session(r *http.Request) *session {
	c, err := r.Cookie(p.cookieName(sessionCookie))
	if err != nil {
		return nil
	}
	var s session
	if !p.open("session", c.Value, &s) || s.HumanID == "" || s.ID == "" || p.now().Unix() >= s.Expires {
		return nil
	}
	return &s
}

func (p *Portal) startSession(w http.ResponseWriter, humanID string) {
	s := session{HumanID: humanID, ID: randomString(16), Expires: p.now().Add(p.sessionTTL).Unix()}
	p.setCookie(w, sessionCookie, p.seal("session", s), p.sessionTTL)
}

// csrfToken is the synchronizer token of the session's forms: an HMAC of its id.
func (p *Portal) csrfToken(s *session) string {
	return base64.RawURLEncoding.EncodeToString(p.mac("csrf", []byte(s.ID)))
}

// checkCSRF reports whether a posted form carries the session's token.
func (p *Portal) checkCSRF(r *http.Request, s *session) bool {
	got := r.PostFormValue("csrf")
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(p.csrfToken(s))) == 1
}
