package edge

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/agent"
	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/core/palm"
)

// The pages' way back: the login page's Cancel (POST /oauth2/verify/cancel) and
// the registration page's "This is not my agent" (POST
// /v1/agent/register/{sessionId}/decline). Each denies the palm challenge as the
// palm app's Deny would, from a form whose CSRF token is bound to a cookie of the
// browser that showed the page: the login cookie for the login (core/oidc's
// CancelToken), a cookie of the registration page's own for the registration.

// handleLoginCancel takes the login page's Cancel: the challenge is denied and the
// browser goes back to the client's redirect_uri with access_denied, state and
// iss. A form without its token, or from another browser, is refused (403) and
// changes nothing.
func (s *Server) handleLoginCancel(w http.ResponseWriter, r *http.Request) {
	params, err := formParams(w, r)
	if err != nil {
		s.writeCancelError(w, r, err)
		return
	}
	id := params.Get("auth_request_id")
	step, err := s.oidc.CancelLogin(r.Context(), id, s.loginBinding(r, id), params.Get("csrf_token"), s.sessionID(r))
	if err != nil {
		s.writeCancelError(w, r, err)
		return
	}
	if step.Redirect == nil { // the challenge could not be ended: nothing went back
		s.writeCancelError(w, r, fault.New(fault.Conflict, oidc.ErrInvalidRequest, "this sign-in could not be cancelled; reload its page"))
		return
	}
	if c := s.logger.Check(zap.DebugLevel, "palmgate login cancelled"); c != nil {
		c.Write(zap.Bool("denied", step.Redirect.Code == ""))
	}
	s.setLoginCookie(w, id, "", -1)
	if step.Session != nil { // verified on the phone before the Cancel arrived
		s.setSessionCookie(w, step.Session.ID, step.Session.ExpiresAt)
	}
	s.answerClient(w, r, step.Redirect)
}

// writeCancelError is the page dialect's answer to a refused Cancel: the status
// of the fault's class and its message on a page, 503 or 429 with Retry-After for
// a temporary refusal, 500 for what is no fault (logged).
func (s *Server) writeCancelError(w http.ResponseWriter, r *http.Request, err error) {
	d := signedOutPageData{Title: "Sign in with your palm", StatusClass: "bad"}
	status := http.StatusInternalServerError
	f, ok := fault.As(err)
	switch {
	case !ok || f.Class == fault.Internal:
		s.logger.Error("palmgate login cancel failed", zap.Error(err))
		d.Outcome = "internal server error"
	case f.Class == fault.Unavailable || f.Class == fault.TooMany:
		if f.RetryAfter > 0 {
			setRetryAfter(w, f.RetryAfter)
		}
		status, d.Outcome = Status(f.Class), "palmgate is temporarily unavailable; try again shortly."
	default:
		status, d.Outcome = Status(f.Class), f.Message
	}
	d.Lines = []string{"Nothing was changed. Go back to the application to start again."}
	s.renderSignedOutPage(w, r, status, d)
}

// registerCookieName is the registration page's binding cookie for session id:
// `__Secure-` prefixed on an https issuer. It is scoped to the session's own
// paths (registerCookiePath), so a browser that opens many registration pages
// sends each cookie only to its own page and form, not with every request
// (a `__Host-` cookie would have to be sent everywhere: Path=/).
func (s *Server) registerCookieName(id string) string {
	if len(id) > 12 {
		id = id[:12]
	}
	if s.secureCookies() {
		return "__Secure-palmgate_register_" + id
	}
	return "palmgate_register_" + id
}

// registerCookiePath is the path of session id's registration page and its
// "This is not my agent" form.
func registerCookiePath(id string) string { return "/v1/agent/register/" + id + "/" }

// registerBinding returns the registration page's binding secret the browser
// holds for session id, or "".
func (s *Server) registerBinding(r *http.Request, id string) string {
	c, err := r.Cookie(s.registerCookieName(id))
	if err != nil || len(c.Value) != 43 {
		return ""
	}
	if _, err := base64.RawURLEncoding.DecodeString(c.Value); err != nil {
		return ""
	}
	return c.Value
}

// declineToken is the CSRF token of the registration page's "This is not my
// agent" for the browser holding binding: an HMAC keyed by it over the session.
func declineToken(binding, sessionID string) string {
	m := hmac.New(sha256.New, []byte(binding))
	m.Write([]byte("palmgate decline\x00" + sessionID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// declineForm gives the browser the registration page's binding (a new one
// unless it holds one) and returns the page's "This is not my agent" form.
func (s *Server) declineForm(w http.ResponseWriter, r *http.Request, session *agent.Session) (*pageForm, error) {
	binding := s.registerBinding(r, session.ID)
	if binding == "" {
		var err error
		if binding, err = newBinding(); err != nil {
			return nil, err
		}
		http.SetCookie(w, &http.Cookie{
			Name: s.registerCookieName(session.ID), Value: binding, Path: registerCookiePath(session.ID),
			MaxAge:   max(int(time.Until(time.Time(session.ExpiresAt).Add(palm.Grace)).Seconds()), 1),
			HttpOnly: true, Secure: s.secureCookies(), SameSite: http.SameSiteStrictMode,
		})
	}
	return &pageForm{Action: "/v1/agent/register/" + session.ID + "/decline", Label: "This is not my agent", Fields: []formPostField{
		{"csrf_token", declineToken(binding, session.ID)},
	}}, nil
}

// errBadDeclineToken refuses a "This is not my agent" form without its token, or
// from a browser that did not show the page.
var errBadDeclineToken = &fault.Error{Class: fault.Forbidden, Code: "forbidden",
	Message: "the form has no valid token; open the registration page again"}

// handleRegisterDecline takes "This is not my agent": the session's palm
// challenge is denied, the session ends failed (the agent's status poll sees it),
// and the browser goes back to the page, which says so (303).
func (s *Server) handleRegisterDecline(w http.ResponseWriter, r *http.Request) {
	params, err := formParams(w, r)
	if err != nil {
		s.writeDeclineError(w, r, err)
		return
	}
	session, err := s.agents.Session(r.Context(), r.PathValue("sessionId"))
	if err != nil {
		s.writeDeclineError(w, r, err)
		return
	}
	binding := s.registerBinding(r, session.ID)
	token := params.Get("csrf_token")
	if binding == "" || token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(declineToken(binding, session.ID))) != 1 {
		s.writeDeclineError(w, r, errBadDeclineToken)
		return
	}
	c, err := s.agents.Challenge(r.Context(), session, false)
	if err != nil {
		s.writeDeclineError(w, r, err)
		return
	}
	if c.Status == palm.StatusPending {
		if _, err := s.palm.Withdraw(r.Context(), c.ID); err != nil && !errors.Is(err, palm.ErrNotPending) && !errors.Is(err, palm.ErrExpired) {
			s.writeDeclineError(w, r, err)
			return
		}
	}
	s.logger.Info("palmgate agent registration declined on its page", zap.String("deviceId", session.DeviceID), zap.String("remote_ip", s.clientIP(r)))
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, s.issuer+"/v1/agent/register/"+session.ID+"/verify", http.StatusSeeOther)
}

// writeDeclineError answers a refused "This is not my agent": the status and
// message of the /v1 mapper, on a page (the /v1 JSON body when JSON was asked).
func (s *Server) writeDeclineError(w http.ResponseWriter, r *http.Request, err error) {
	if wantsJSON(r) {
		s.writeError(w, r, err)
		return
	}
	e, retry := v1Error(err)
	if e.Status == http.StatusInternalServerError {
		s.logger.Error("palmgate registration decline failed", zap.Error(err))
	}
	if retry > 0 {
		setRetryAfter(w, retry)
	}
	s.renderSignedOutPage(w, r, e.Status, signedOutPageData{
		Title: "Register an agent", StatusClass: "bad", Outcome: e.Message,
		Lines: []string{"Nothing was changed."},
	})
}
