package oidc

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"

	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/palm"
)

// The login page's Cancel: the person declines on the page itself, as the palm
// app's Deny does on the phone. The form is POSTed with a CSRF token bound to the
// browser's login cookie, so no other site (and no other browser) can cancel a
// login; the challenge is denied and the browser goes back to the client with
// access_denied, state and iss, the way a denial on the phone ends.

// ErrBadCancelToken refuses a Cancel form without the right CSRF token.
var ErrBadCancelToken = &fault.Error{Class: fault.Forbidden, Code: ErrAccessDenied,
	Message: "the cancel form has no valid token; reload the sign-in page and try again"}

// CancelToken is the CSRF token of the Cancel form of authorization request id
// for the browser whose login binding is binding: an HMAC keyed by that secret (an
// HttpOnly cookie no other site can read) over the request id.
func CancelToken(binding, id string) string {
	m := hmac.New(sha256.New, []byte(binding))
	m.Write([]byte("palmgate cancel\x00" + id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// CancelLogin denies the palm challenge of authorization request id, for the
// browser presenting binding (its login cookie) and token (the form's CSRF
// token), and answers the login as LoginPage would: access_denied. A request of
// another browser is ErrOtherBrowser, a wrong token ErrBadCancelToken, an
// answered one invalid_request. A challenge that ended meanwhile (verified on
// the phone, or expired) is answered as it ended: the person's palm scan came
// first.
func (s *Service) CancelLogin(ctx context.Context, id, binding, token, session string) (*LoginStep, error) {
	st, err := s.Login(ctx, id, binding, false)
	if err != nil {
		return nil, err
	}
	if !st.Bound {
		return nil, ErrOtherBrowser
	}
	if token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(CancelToken(binding, id))) != 1 {
		return nil, ErrBadCancelToken
	}
	if st.Request.Status == RequestAnswered {
		return nil, oauthError(ErrInvalidRequest, "this authorization request was already answered")
	}
	if st.Challenge.Status == palm.StatusPending {
		_, err := s.palm.Withdraw(ctx, st.Challenge.ID)
		if err != nil && !errors.Is(err, palm.ErrNotPending) && !errors.Is(err, palm.ErrExpired) {
			return nil, err
		}
	}
	return s.LoginPage(ctx, id, binding, LoginOptions{Finish: true, Session: session})
}
