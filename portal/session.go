package portal

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/storage"
)

// A developer's session is a signed cookie and a store record. The cookie holds the
// developer's humanId, which only their browser sees (HttpOnly), a random session
// id that keys the CSRF token, and its expiry (SessionTTL after sign-in); every
// instance on the store checks its signature with the same key
// (oidc.Service.DerivedKey). The record (keys.go) says the session is live: each
// portal request reads it from the store, with no cache, so a sign-out (which
// deletes it) or an operator's EndSessions ends the session on every instance at
// once, a replayed copy of the cookie included. A store that cannot be read admits
// no cookie (the portal answers 503).
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
)

// storedSession is a live session's record.
type storedSession struct {
	Expires int64 `json:"e"`
}

// session returns the request's live session: nil without a cookie, with a
// forged, expired or ended one; an error when the store cannot say.
func (p *Portal) session(r *http.Request) (*session, error) {
	c, err := r.Cookie(p.cookieName(sessionCookie))
	if err != nil {
		return nil, nil
	}
	var s session
	if !p.open("session", c.Value, &s) || s.HumanID == "" || s.ID == "" || p.now().Unix() >= s.Expires {
		return nil, nil
	}
	if _, err := storage.ReadKey(r.Context(), p.store, sessionKey(s.HumanID, s.ID)); errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("reading a portal session: %w", err)
	}
	return &s, nil
}

// startSession stores a new session of humanID, then sets its cookie. A session
// the browser already had (whose cookie the new one replaces) ends in the same
// transaction, so no copy of the replaced cookie outlives the sign-in.
func (p *Portal) startSession(ctx context.Context, w http.ResponseWriter, r *http.Request, humanID string) error {
	s := session{HumanID: humanID, ID: randomString(16), Expires: p.now().Add(p.sessionTTL).Unix()}
	rec, _ := json.Marshal(storedSession{Expires: s.Expires})
	var replaced session
	if c, err := r.Cookie(p.cookieName(sessionCookie)); err != nil || !p.open("session", c.Value, &replaced) {
		replaced = session{}
	}
	err := p.store.Update(ctx, func(txn storage.Txn) error {
		if replaced.HumanID != "" && replaced.ID != "" {
			if err := txn.Delete(sessionKey(replaced.HumanID, replaced.ID)); err != nil {
				return err
			}
		}
		return txn.Set(sessionKey(s.HumanID, s.ID), rec, p.sessionTTL)
	})
	if err != nil {
		return fmt.Errorf("storing a portal session: %w", err)
	}
	p.setCookie(w, sessionCookie, p.seal("session", s), p.sessionTTL)
	return nil
}

// endSession deletes s's record: its cookie, and every copy of it, is no session
// from then on, on every instance.
func (p *Portal) endSession(ctx context.Context, s *session) error {
	err := p.store.Update(ctx, func(txn storage.Txn) error { return txn.Delete(sessionKey(s.HumanID, s.ID)) })
	if err != nil {
		return fmt.Errorf("ending a portal session: %w", err)
	}
	return nil
}

// ErrInvalidOwner is the error of EndSessions for an owner that is not a humanId.
var ErrInvalidOwner = errors.New("portal: invalid owner")

// EndSessions ends every portal session of the developer owner (a humanId: the
// owner the registry records on their applications) on every instance on store,
// and reports how many were live. The developer can sign in again.
func EndSessions(ctx context.Context, store storage.Store, owner string) (int, error) {
	if u, err := uuid.Parse(owner); err != nil || u.String() != owner {
		return 0, &fault.Error{Class: fault.Invalid, Code: fault.CodeInvalidField, Kind: ErrInvalidOwner,
			Message: "owner must be a developer's id (a client's owner, a lowercase uuid)", Details: map[string]any{"field": "owner"}}
	}
	var n int
	err := store.Update(ctx, func(txn storage.Txn) error {
		var err error
		n, err = EndSessionsTxn(txn, owner)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("ending the portal sessions of a developer: %w", err)
	}
	return n, nil
}

// EndSessionsTxn is EndSessions in txn, for an owner already checked (the
// operator ending a person's every session in one transaction).
func EndSessionsTxn(txn storage.Txn, owner string) (int, error) {
	return storage.DeletePrefix(txn, sessionPrefix(owner))
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
