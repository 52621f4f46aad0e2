package oidc

import (
	"context"

	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/storage"
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

// LoginState is an authorization request with its palm challenge, as the browser
// presenting binding may see it.
type LoginState struct {
	Request   *AuthRequest
	Challenge *palm.Challenge
	// Bound reports whether the browser is the one that made the request; only
	// then may it see the challenge's nonce (and scan URL).
	Bound bool
}

// Login returns an authorization request and its challenge, for the login page of
// the browser presenting binding. For that browser it renews the challenge's scan
// URL when due (see palm.Service.Renew); unless renew is false (a HEAD request,
// which changes nothing).
func (s *Service) Login(ctx context.Context, id, binding string, renew bool) (*LoginState, error) {
	var st LoginState
	err := s.store.View(ctx, func(txn storage.Txn) error {
		var err error
		if st.Request, err = getAuthRequest(txn, id); err != nil {
			return err
		}
		if st.Request.ChallengeID == "" { // answered by the SSO session: no scan, no login page
			return oauthError(ErrInvalidRequest, "this authorization request has no palm scan; its page is the consent page")
		}
		st.Challenge, err = palm.GetChallenge(txn, st.Request.ChallengeID)
		return err
	})
	if err != nil {
		return nil, err
	}
	st.Bound = st.Request.boundTo(binding)
	if st.Bound && renew {
		if st.Challenge, err = s.palm.Renew(ctx, st.Challenge.ID); err != nil {
			return nil, err
		}
	}
	st.Challenge.Status = st.Challenge.StatusAt(s.now())
	return &st, nil
}

// outcome records the end of a login's palm challenge on its authorization request.
type outcome struct{ s *Service }

func (o outcome) Verified(txn storage.Txn, c *palm.Challenge, humanID string) error {
	ar, err := getAuthRequest(txn, c.Ref)
	if err != nil {
		return err
	}
	ar.Status, ar.HumanID, ar.AuthTime = RequestVerified, humanID, o.s.now().UTC()
	return o.s.putAuthRequest(txn, ar)
}

func (o outcome) Denied(txn storage.Txn, c *palm.Challenge) error {
	ar, err := getAuthRequest(txn, c.Ref)
	if err != nil {
		return err
	}
	ar.Status = RequestDenied
	return o.s.putAuthRequest(txn, ar)
}
