package oidc

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/records"
	"github.com/palmgate/palmgate/storage"
)

// The single sign-on session (sso_session): after a verified palm scan at login the
// browser holds a random session id (its cookie); the store holds only the id's
// SHA-256, with the human and the scan's time. Within the session an authorization
// request is answered without a scan, after a one-click consent the first time a
// client asks for a set of scopes (consent is remembered per human and client, as
// the union of the scope sets granted; asking for more asks again).
//
// The session is read from the store on every authorization request (authorize is
// no hot path: a person's click, not an API call), so a logout or an expiry ends
// it on every instance sharing the store at once: no cache, no staleness bound.
//
// Its lifetime is absolute: it ends sso_session after the scan that started it,
// however much it is used. A new scan always starts a new session (a new id: the
// fixation defence) and ends the one the browser held.

// ACRPalm is the `acr` of every ID token palmgate issues: the person was
// authenticated by a palm scan that a trusted palm engine verified (an inherence
// factor on a possession factor, the phone that holds the palm app). Its time is
// `auth_time`; a session never lowers it, as every session starts with a scan.
const ACRPalm = "urn:palmgate:acr:palm"

// AMRPalm is the `amr` value palmgate defines (RFC 8176 registers none for palms):
// a palm scan verified by a trusted palm engine.
const AMRPalm = "palm"

// ErrConsentRequired refuses prompt=none when the person has not consented to the
// scopes for the client (OIDC Core 3.1.2.6).
const ErrConsentRequired = "consent_required"

func init() { oauthCodes[ErrConsentRequired] = true }

// RequestConsent is the state of an authorization request answered by the SSO
// session that waits for the person's consent.
const RequestConsent AuthRequestStatus = "consent"

// sessionIDBytes is the size of a session id: 256 random bits.
const sessionIDBytes = 32

// ssoSession is a stored SSO session, under the hash of its id.
type ssoSession struct {
	HumanID   string    `json:"humanId"`
	AuthTime  time.Time `json:"authTime"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// consentRecord is what a human consented to for a client: the union of the scope
// sets it granted, and (fourth review) of the resources it let the client reach
// as the person (a record of an earlier release names none: a request for a
// resource asks once more).
type consentRecord struct {
	Scopes    []string `json:"scopes"`
	Resources []string `json:"resources,omitempty"`
}

// covers reports whether the consent includes every scope of asked and, when
// resource is not "", that resource.
func (c *consentRecord) covers(asked []string, resource string) bool {
	return c != nil && covers(c.Scopes, asked) && (resource == "" || slices.Contains(c.Resources, resource))
}

// Session is a new SSO session: the id the browser keeps in its cookie until
// ExpiresAt.
type Session struct {
	ID        string
	ExpiresAt time.Time
}

// SSOSession is the lifetime of SSO sessions; zero means off (every login scans).
func (s *Service) SSOSession() time.Duration { return s.ssoTTL }

func sessionHash(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// validSessionID reports whether id has the form of a session id (43 base64url
// characters); anything else is never looked up.
func validSessionID(id string) bool {
	if len(id) != 43 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(id)
	return err == nil
}

// getSession reads the session of hash, nil when there is none or it has expired.
func (s *Service) getSession(txn storage.Txn, hash string) (*ssoSession, error) {
	sess, err := records.Get[ssoSession](txn, sessionKey(hash), errNoSession, "sso session")
	if errors.Is(err, errNoSession) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !s.now().Before(sess.ExpiresAt) {
		return nil, nil
	}
	return sess, nil
}

var errNoSession = errors.New("no sso session")

// startSession writes a new session for the human of a verified login ar, and its
// consent to ar's scopes for ar's client (the palm scan showed them); it ends the
// session whose id the browser held before (old, "" for none). It only writes the
// store (fn may run again).
func (s *Service) startSession(txn storage.Txn, id, old string, ar *AuthRequest) (*Session, error) {
	if old != "" && validSessionID(old) {
		if err := s.carryLogins(txn, sessionHash(old), sessionHash(id), ar.HumanID); err != nil {
			return nil, err
		}
		if err := s.dropSession(txn, sessionHash(old)); err != nil {
			return nil, err
		}
	}
	exp := s.now().Add(s.ssoTTL)
	b, err := json.Marshal(ssoSession{HumanID: ar.HumanID, AuthTime: ar.AuthTime, ExpiresAt: exp})
	if err != nil {
		return nil, err
	}
	if err := txn.Set(sessionKey(sessionHash(id)), b, s.ssoTTL); err != nil {
		return nil, err
	}
	if err := s.indexSession(txn, ar.HumanID, sessionHash(id)); err != nil {
		return nil, err
	}
	if err := s.addConsent(txn, ar.HumanID, ar.ClientID, ar.Scopes, ar.Resource); err != nil {
		return nil, err
	}
	return &Session{ID: id, ExpiresAt: exp}, nil
}

func (s *Service) getConsent(txn storage.Txn, humanID, clientID string) ([]string, error) {
	c, err := s.getConsentRecord(txn, humanID, clientID)
	if c == nil || err != nil {
		return nil, err
	}
	return c.Scopes, nil
}

// getConsentRecord is humanID's consent to clientID, nil when none.
func (s *Service) getConsentRecord(txn storage.Txn, humanID, clientID string) (*consentRecord, error) {
	c, err := records.Get[consentRecord](txn, consentKey(humanID, clientID), errNoSession, "consent")
	if errors.Is(err, errNoSession) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// addConsent adds scopes (and resource, unless "") to what humanID consented to
// for clientID. It is kept as long as a refresh token lives, and renewed with
// each consent.
func (s *Service) addConsent(txn storage.Txn, humanID, clientID string, scopes []string, resource string) error {
	have, err := s.getConsentRecord(txn, humanID, clientID)
	if err != nil {
		return err
	}
	if have == nil {
		have = &consentRecord{}
	}
	all := append(slices.Clone(have.Scopes), scopes...)
	slices.Sort(all)
	resources := slices.Clone(have.Resources)
	if resource != "" && !slices.Contains(resources, resource) {
		resources = append(resources, resource)
	}
	b, err := json.Marshal(consentRecord{Scopes: slices.Compact(all), Resources: resources})
	if err != nil {
		return err
	}
	return txn.Set(consentKey(humanID, clientID), b, s.refreshTTL)
}

// covers reports whether the consented scopes include every one of asked.
func covers(consented, asked []string) bool {
	for _, sc := range asked {
		if !slices.Contains(consented, sc) {
			return false
		}
	}
	return true
}

// authorizeInSession answers an authorization request ar of client cl, whose
// parameters are valid, from the browser's SSO session: ar with Answer set (a
// code went back), ar in state RequestConsent (stored, waiting for the consent
// page), or nil when a palm scan is needed. prompt=none is never answered with a
// scan or a page: login_required or consent_required go back to the client.
func (s *Service) authorizeInSession(ctx context.Context, ar *AuthRequest, browser Browser, back *RedirectError) (*AuthRequest, error) {
	none := slices.Contains(ar.prompt, "none")
	scan := func(why string) (*AuthRequest, error) {
		if none {
			back.Fault = oauthError(ErrLoginRequired, "%s", why)
			return nil, back
		}
		return nil, nil
	}
	if s.ssoTTL == 0 {
		return scan("a palm scan is required")
	}
	// login asks for a new scan; so does select_account (OIDC Core 3.1.2.1: the
	// person chooses the account, and the palm that scans is that choice).
	if slices.Contains(ar.prompt, "login") || slices.Contains(ar.prompt, "select_account") {
		return nil, nil
	}
	if !validSessionID(browser.Session) {
		return scan("no palmgate session in this browser: a palm scan is required")
	}
	code, err := randomToken(codeBytes)
	if err != nil {
		return nil, err
	}
	now := s.now().UTC()
	hash := sessionHash(browser.Session)
	var out *AuthRequest
	var why string
	err = s.store.Update(ctx, func(txn storage.Txn) error {
		out, why = nil, ""
		sess, err := s.getSession(txn, hash)
		if err != nil {
			return err
		}
		if sess == nil {
			why = "the palmgate session has ended: a palm scan is required"
			return nil
		}
		if !s.sessionMatchesHint(ar, sess.HumanID) {
			why = "the id_token_hint names another person than this browser's palmgate session: a palm scan is required"
			return nil
		}
		if ar.maxAge == 0 || (ar.maxAge > 0 && now.Sub(sess.AuthTime) > time.Duration(ar.maxAge)*time.Second) {
			why = "the last palm scan is older than max_age: a new scan is required"
			return nil
		}
		consented, err := s.getConsentRecord(txn, sess.HumanID, ar.ClientID)
		if err != nil {
			return err
		}
		r := *ar
		r.ID, r.ExpiresAt, r.BrowserHash = uuid.NewString(), now.Add(s.loginTTL), bindingHash(browser.Binding)
		r.HumanID, r.AuthTime, r.SessionHash = sess.HumanID, sess.AuthTime, hash
		// A private-use scheme proves no app (any app may claim it, RFC 8252 8.6:
		// no automatic answer without interaction): the person confirms each time.
		appScheme := PrivateUseRedirect(ar.RedirectURI)
		if slices.Contains(ar.prompt, "consent") || !consented.covers(ar.Scopes, ar.Resource) || appScheme {
			if none && appScheme && consented.covers(ar.Scopes, ar.Resource) {
				return oauthError(ErrConsentRequired, "an answer to a private-use scheme redirect_uri needs the person's confirmation each time (RFC 8252 8.6)")
			}
			if none {
				return oauthError(ErrConsentRequired, "the person has not consented to these scopes (or this resource) for this client")
			}
			r.Status = RequestConsent
			out = &r
			return s.putAuthRequest(txn, out)
		}
		if err := s.putCode(txn, code, &r, hash, sess.ExpiresAt); err != nil {
			return err
		}
		r.Status = RequestAnswered
		r.Answer = &Redirect{URI: r.RedirectURI, Code: code, State: r.State, Issuer: s.issuer, Mode: r.ResponseMode}
		out = &r
		return nil
	})
	var f *fault.Error
	if errors.As(err, &f) && IsOAuthCode(f.Code) {
		back.Fault = f
		return nil, back
	}
	if err != nil {
		return nil, err
	}
	if out == nil {
		return scan(why)
	}
	// A login started (and, without consent to ask, completed) in the session.
	s.events.Emit(ctx, event.Event{Kind: event.Login, Outcome: event.Started, ClientID: out.ClientID})
	if out.Answer != nil {
		s.events.Emit(ctx, event.Event{Kind: event.Login, Outcome: event.Completed, ClientID: out.ClientID, HumanID: out.HumanID})
	}
	return out, nil
}

// ConsentState is an authorization request waiting for consent, as the browser
// presenting binding may see it.
type ConsentState struct {
	Request    *AuthRequest
	ClientName string
	// ClientNotice says who registered the client when the operator did not (a
	// developer, the client itself, a metadata document's host), as the login page
	// and the palm app say it; "" for the operator's clients. Within an SSO session
	// this page is all the person sees before Allow.
	ClientNotice string
	// Token is the consent form's CSRF token, "" for a browser that did not make
	// the request (Bound false).
	Token string
	Bound bool
}

// ErrBadConsentToken refuses a consent form without the right CSRF token.
var ErrBadConsentToken = &fault.Error{Class: fault.Forbidden, Code: ErrAccessDenied,
	Message: "the consent form has no valid token; start the sign-in again from the application"}

// consentToken is the CSRF token of the consent form of ar for the browser whose
// login binding is binding: an HMAC keyed by that secret (an HttpOnly cookie no
// other site can read) over the request and its session, so a token is good for
// one pending request, in one browser, in one session.
func consentToken(binding string, ar *AuthRequest) string {
	m := hmac.New(sha256.New, []byte(binding))
	m.Write([]byte("palmgate consent\x00" + ar.ID + "\x00" + ar.SessionHash))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// ConsentPage returns the authorization request id waiting for consent, for the
// consent page of the browser presenting binding.
func (s *Service) ConsentPage(ctx context.Context, id, binding string) (*ConsentState, error) {
	notFound := fault.Of(ErrUnknownAuthRequest, "unknown or expired auth_request_id")
	if _, err := uuid.Parse(id); err != nil || len(id) != 36 {
		return nil, notFound
	}
	ar, err := records.Read[AuthRequest](ctx, s.store, authRequestKey(id), notFound, "authorization request "+id)
	if err != nil {
		return nil, err
	}
	if ar.Status != RequestConsent || !s.now().Before(ar.ExpiresAt) {
		return nil, oauthError(ErrInvalidRequest, "this authorization request is not waiting for consent")
	}
	st := &ConsentState{Request: ar, ClientName: ar.ClientID, Bound: ar.boundTo(binding)}
	cl, err := s.clients.lookup(ctx, ar.ClientID)
	if err != nil {
		return nil, err
	}
	if cl != nil {
		st.ClientName, st.ClientNotice = cl.name, cl.notice
	}
	if st.Bound {
		st.Token = consentToken(binding, ar)
	}
	return st, nil
}

// Consent answers the consent form of authorization request id, from the browser
// presenting binding (its login cookie), session (its SSO cookie) and token (the
// form's CSRF token): with allow, a code goes back and the consent is remembered;
// without, access_denied. A request of another browser is ErrOtherBrowser, a
// missing or wrong token ErrBadConsentToken; a session that ended meanwhile sends
// login_required back to the client.
func (s *Service) Consent(ctx context.Context, id, binding, session, token string, allow bool) (*Redirect, error) {
	if err := s.checkRedirectStill(ctx, id, binding); err != nil {
		return nil, err
	}
	code, err := randomToken(codeBytes)
	if err != nil {
		return nil, err
	}
	var redirect *Redirect
	var answered event.Event // fn may run again: each run sets it anew
	err = s.store.Update(ctx, func(txn storage.Txn) error {
		redirect, answered = nil, event.Event{}
		ar, err := getAuthRequest(txn, id)
		if err != nil {
			return err
		}
		if !ar.boundTo(binding) {
			return ErrOtherBrowser
		}
		if ar.Status != RequestConsent || !s.now().Before(ar.ExpiresAt) {
			return oauthError(ErrInvalidRequest, "this authorization request is not waiting for consent")
		}
		if token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(consentToken(binding, ar))) != 1 {
			return ErrBadConsentToken
		}
		answer := func(code, description string) *Redirect {
			return &Redirect{URI: ar.RedirectURI, Error: code, Description: description, State: ar.State, Issuer: s.issuer, Mode: ar.ResponseMode}
		}
		var sess *ssoSession
		if validSessionID(session) && subtle.ConstantTimeCompare([]byte(sessionHash(session)), []byte(ar.SessionHash)) == 1 {
			if sess, err = s.getSession(txn, ar.SessionHash); err != nil {
				return err
			}
		}
		switch {
		case sess == nil || sess.HumanID != ar.HumanID:
			redirect = answer(ErrLoginRequired, "the palmgate session has ended: sign in again")
		case !allow:
			redirect = answer(ErrAccessDenied, "the person declined")
		default:
			if err := s.addConsent(txn, ar.HumanID, ar.ClientID, ar.Scopes, ar.Resource); err != nil {
				return err
			}
			if err := s.putCode(txn, code, ar, ar.SessionHash, sess.ExpiresAt); err != nil {
				return err
			}
			redirect = &Redirect{URI: ar.RedirectURI, Code: code, State: ar.State, Issuer: s.issuer, Mode: ar.ResponseMode}
		}
		ar.Status = RequestAnswered
		answered = event.Event{Kind: event.Login, Outcome: event.Denied, ClientID: ar.ClientID, HumanID: ar.HumanID}
		if redirect.Code != "" {
			answered.Outcome = event.Completed
		}
		return s.putAuthRequest(txn, ar)
	})
	if err != nil {
		return nil, err
	}
	if answered.Kind == event.Login {
		s.events.Emit(ctx, answered)
	}
	return redirect, nil
}

// EndSSOSession ends the SSO session whose id the browser holds, on every instance
// (the store is read on every use). An id of the wrong form, or of no session,
// ends nothing; ended reports whether one was live.
func (s *Service) EndSSOSession(ctx context.Context, id string) (ended bool, err error) {
	if !validSessionID(id) {
		return false, nil
	}
	hash := sessionHash(id)
	err = s.store.Update(ctx, func(txn storage.Txn) error {
		ended = false
		_, err := txn.Get(sessionKey(hash))
		switch {
		case errors.Is(err, storage.ErrNotFound):
			return nil
		case err != nil:
			return err
		}
		ended = true
		return s.dropSession(txn, hash)
	})
	return ended, err
}
