package oidc

import (
	"context"

	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/palm"
)

// LoginStep says what the login page of an authorization request shows next.
type LoginStep struct {
	// State is the request and its challenge as the browser may see them.
	State *LoginState
	// Redirect, when set, ends the login: the browser goes back to the client with
	// a code or access_denied.
	Redirect *Redirect
	// Session, when set, is the SSO session the verified scan started: the
	// browser's new session cookie.
	Session *Session
}

// LoginOptions say what a look at the login page may change.
type LoginOptions struct {
	// Renew renews the scan URL when due (false for HEAD, which changes nothing).
	Renew bool
	// Finish answers a login whose challenge has ended (false for HEAD and for the
	// page's JSON view, which only reports).
	Finish bool
	// Session is the SSO session id the browser holds (its cookie), which a
	// verified scan ends as it starts a new one; "" for none.
	Session string
}

// LoginPage is the login's state machine, for the browser presenting binding: an
// answered request is invalid_request (a code is issued once); a request of
// another browser is shown without its nonce (State.Bound false) and never
// answered; a verified, denied or expired one is answered (Redirect); a pending
// one is shown.
func (s *Service) LoginPage(ctx context.Context, id, binding string, opt LoginOptions) (*LoginStep, error) {
	st, err := s.Login(ctx, id, binding, opt.Renew)
	if err != nil {
		return nil, err
	}
	if st.Request.Status == RequestAnswered {
		return nil, fault.Of(ErrRequestAnswered, "this authorization request was already answered")
	}
	step := &LoginStep{State: st}
	if st.Bound && opt.Finish && st.Challenge.Status != palm.StatusPending {
		if step.Redirect, step.Session, err = s.finish(ctx, id, binding, opt.Session); err != nil {
			return nil, err
		}
	}
	return step, nil
}
