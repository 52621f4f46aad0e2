package edge

import (
	"crypto/rand"
	"encoding/base64"
	"html/template"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/internal/brand"
)

var signedOutPage = template.Must(template.ParseFS(pageFiles, "pages/signedout.html", "pages/base.html"))

// signedOutPageData fills the page of the logout endpoint.
type signedOutPageData struct {
	Title, Outcome, StatusClass string
	Lines                       []string
	// Link and LinkText, when set, are the page's one link: on to a
	// post_logout_redirect_uri an anonymous registrant chose (oidc.Logout.Confirm),
	// or back to the agents page for a new session once its own has ended.
	Link     template.URL
	LinkText string
	CSPNonce string
	Brand    brand.Brand
}

// handleLogout is the end_session_endpoint (OpenID Connect RP-Initiated Logout 1.0),
// GET or POST: it revokes the login named by id_token_hint and every login made
// through its SSO session or this browser's (single logout), then sends the browser
// to the registered post_logout_redirect_uri with state, or shows the signed-out
// page. A refused request is a 400 page, never a redirect (the URI may not be the
// client's). HEAD (which the GET route also serves) changes nothing.
func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodHead {
		s.renderSignedOutPage(w, r, http.StatusOK, signedOutPageData{Title: "You are signed out"})
		return
	}
	params, err := formParams(w, r)
	var out *oidc.Logout
	if err == nil {
		out, err = s.oidc.EndSessionFrom(r.Context(), params, s.sessionID(r))
	}
	var ended bool
	if err == nil {
		// The browser's SSO session ends with any valid logout request, on every
		// instance (the store holds it); the cookie goes too.
		if ended, err = s.oidc.EndSSOSession(r.Context(), s.sessionID(r)); err == nil && s.sessionID(r) != "" {
			s.setSessionCookie(w, "", time.Time{})
		}
		ended = ended || out.SessionEnded // single logout dropped it already
	}
	if err != nil {
		s.writeLogoutError(w, r, err)
		return
	}
	if c := s.logger.Check(zap.DebugLevel, "palmgate logout"); c != nil {
		c.Write(zap.String("client_id", out.ClientID), zap.Bool("revoked", out.GrantID != ""), zap.Int("logins_ended", out.Logins), zap.Bool("session_ended", ended), zap.Bool("redirect", out.RedirectURI != ""))
	}
	if u := out.URL(); u != "" && !out.Confirm {
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, u, http.StatusFound)
		return
	}
	d := signedOutPageData{Title: "You are signed out", StatusClass: "ok", Outcome: "You are signed out."}
	switch {
	case out.Logins > 1 && !out.BrowserKept:
		// Single logout: the sign-ins of every application the session signed in to.
		d.Lines = []string{"Your sign-ins to the applications you signed in to with palmgate here have ended: their tokens no longer work.", "Your palmgate session has ended: the next sign-in asks for your palm.", "You can close this page."}
	case out.Logins > 1:
		// The hint's session's sign-ins ended, not those of this browser's session
		// (another person's, or the hint was an old one): only that session ended here.
		d.Lines = []string{"The application's sign-in, and the others made with the same palmgate session, have ended: their tokens no longer work."}
		if ended {
			d.Lines = append(d.Lines, "Your palmgate session in this browser has ended: the next sign-in asks for your palm.")
		}
		d.Lines = append(d.Lines, "You can close this page.")
	case out.GrantID != "" && ended:
		d.Lines = []string{"The application's sign-in has ended: its tokens no longer work.", "Your palmgate session in this browser has ended: the next sign-in asks for your palm.", "You can close this page."}
	case out.GrantID != "":
		d.Lines = []string{"The application's sign-in has ended: its tokens no longer work.", "You can close this page."}
	case ended:
		d.Lines = []string{"Your palmgate session in this browser has ended: the next sign-in asks for your palm.", "You can close this page."}
	default:
		// Without id_token_hint no sign-in can be named, and this browser holds no
		// palmgate session: nothing to end here.
		d.Lines = []string{"This browser holds no palmgate session: the next sign-in asks for your palm.", "You can close this page."}
	}
	if out.Confirm {
		// Not redirected unseen: the URI is an anonymous registrant's, and no
		// id_token_hint shows anyone signed in there (oidc.Logout.Confirm).
		dest := boundRunes(oidc.RedirectDestination(out.RedirectURI), 100)
		d.Lines = append(d.Lines[:len(d.Lines)-1:len(d.Lines)-1],
			"The sign-out link came from an application that registered itself with this service, not with its operator.",
			"Continue only if you know "+dest+"; otherwise close this page.")
		d.Link, d.LinkText = template.URL(out.URL()), "Continue to "+dest // a registered URI (oidc.CheckClientRedirectURI)
	}
	s.renderSignedOutPage(w, r, http.StatusOK, d)
}

// writeLogoutError answers a refused logout with the error page (pageOf) titled
// "Sign-out refused": its status by the fault's class, Retry-After and the "try
// again" words for a temporary refusal (the store's outage included), 500 for
// anything that is not a fault (logged). The person reads plain words; the
// protocol's text (post_logout_redirect_uri, id_token_hint ...) stays in the small
// print, for the application's developer. A program (no text/html in its
// Accept) gets the same refusal in the OAuth dialect, as the token endpoint's.
func (s *Server) writeLogoutError(w http.ResponseWriter, r *http.Request, err error) {
	if !acceptsHTML(r) {
		s.writeOAuthError(w, r, err)
		return
	}
	status, d, f := pageOf(err)
	if status == http.StatusInternalServerError {
		s.logger.Error("palmgate logout failed", zap.Error(err))
	}
	d.Title = "Sign-out refused"
	switch {
	case f != nil && (f.Class == fault.Unavailable || f.Class == fault.TooMany):
		if f.RetryAfter > 0 {
			setRetryAfter(w, f.RetryAfter)
		}
	case f != nil:
		d.What = "The sign-out link that brought you here is not valid, so this service could not sign you out."
		d.Todo = []string{"Nothing was changed. Go back to the application and sign out again. If it happens again, tell the application's developer."}
	}
	s.renderErrorPage(w, r, status, d)
}

// renderSignedOutPage writes the logout page with a strict Content-Security-Policy:
// no script, no external source, the inline style by nonce.
func (s *Server) renderSignedOutPage(w http.ResponseWriter, r *http.Request, status int, d signedOutPageData) {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce) // crypto/rand never fails on supported platforms
	d.CSPNonce = base64.RawStdEncoding.EncodeToString(nonce)
	d.Brand = s.brand
	s.setPageHeaders(w.Header(), pagePolicy{nonce: d.CSPNonce})
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	if err := signedOutPage.Execute(w, d); err != nil {
		s.logger.Debug("writing signed-out page", zap.Error(err))
	}
}
