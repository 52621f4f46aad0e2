package edge

import (
	"crypto/rand"
	"encoding/base64"
	"html/template"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/internal/brand"
)

// The single sign-on session's browser side (core/oidc/session.go has its rules):
// one host-only cookie holding the random session id, HttpOnly, SameSite=Lax, and
// on an https issuer Secure and `__Host-` prefixed (no other host or path can set
// or shadow it). The consent page, in the style of the login page, asks the
// person once per client and scope set; its form is POSTed with a CSRF token bound
// to the login cookie of the pending request and to the session.

var consentPage = template.Must(template.ParseFS(pageFiles, "pages/consent.html", "pages/base.html"))

// consentPageData fills the consent page.
type consentPageData struct {
	Title, Outcome, StatusClass string
	Lines                       []template.HTML
	Scopes                      []oidc.ScopeWords
	Brand                       brand.Brand
	// Open shows the form (the browser that made the request, still pending).
	Open                 bool
	AuthRequestID, Token string
	CSPNonce             string
	// ToClient: the form's answer redirects to the client's redirect_uri, so the
	// page has no CSP form-action (pagePolicy.toClient).
	ToClient bool
	// EachTime: the answer goes to a native app's private-use scheme, which is
	// asked for each time (oidc: RFC 8252 8.6), not remembered.
	EachTime bool
}

// sessionCookieName is the SSO session's cookie.
func (s *Server) sessionCookieName() string {
	if s.secureCookies() {
		return "__Host-palmgate_session"
	}
	return "palmgate_session"
}

// sessionID returns the SSO session id the browser sent, or "" (core checks its
// form again).
func (s *Server) sessionID(r *http.Request) string {
	c, err := r.Cookie(s.sessionCookieName())
	if err != nil || len(c.Value) != 43 {
		return ""
	}
	return c.Value
}

// setSessionCookie gives the browser session id until expires; "" clears it.
func (s *Server) setSessionCookie(w http.ResponseWriter, id string, expires time.Time) {
	maxAge := -1
	if id != "" {
		maxAge = max(int(time.Until(expires).Seconds()), 1)
	}
	http.SetCookie(w, &http.Cookie{
		Name: s.sessionCookieName(), Value: id, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: s.secureCookies(), SameSite: http.SameSiteLaxMode,
	})
}

// handleConsentPage shows the consent form of an authorization request the SSO
// session answered: the application's name and what it receives, Allow and Deny.
// Only the browser that made the request (its login cookie) gets the form.
func (s *Server) handleConsentPage(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("auth_request_id")
	st, err := s.oidc.ConsentPage(r.Context(), id, s.loginBinding(r, id))
	if err != nil {
		s.writeConsentError(w, r, err)
		return
	}
	if !st.Bound {
		s.renderConsentPage(w, r, http.StatusForbidden, consentPageData{Title: "Allow access?", StatusClass: "bad",
			Outcome: "This sign-in was started in another browser. Finish it there, or start again from the application."})
		return
	}
	who := "<b>" + template.HTMLEscapeString(st.ClientName) + "</b>"
	if st.ClientNotice != "" { // registered by a developer or by itself: said as on the login page
		who += " (<span id=\"self-registered\">" + template.HTMLEscapeString(st.ClientNotice) + "</span>)"
	}
	lines := []template.HTML{template.HTML(who + " asks to sign you in. It receives:")}
	if st.Request.Resource != "" {
		lines = append(lines, template.HTML(template.HTMLEscapeString(oidc.DescribeResource(st.Request.Resource))))
	}
	lines = prependAppDestination(lines, st.Request.RedirectURI)
	s.renderConsentPage(w, r, http.StatusOK, consentPageData{Title: "Allow access?", Lines: lines, Scopes: oidc.DescribeScopeList(st.Request.Scopes), Open: true,
		AuthRequestID: st.Request.ID, Token: st.Token, ToClient: true, EachTime: oidc.PrivateUseRedirect(st.Request.RedirectURI)})
}

// handleConsent takes the consent form: the code (or access_denied) goes back to
// the client. A form without its CSRF token, or from another browser, is refused
// with a page (403) and changes nothing.
func (s *Server) handleConsent(w http.ResponseWriter, r *http.Request) {
	params, err := formParams(w, r)
	if err != nil {
		s.writeConsentError(w, r, err)
		return
	}
	id := params.Get("auth_request_id")
	allow := params.Get("decision") == "allow"
	redirect, err := s.oidc.Consent(r.Context(), id, s.loginBinding(r, id), s.sessionID(r), params.Get("csrf_token"), allow)
	if err != nil {
		s.writeConsentError(w, r, err)
		return
	}
	if c := s.logger.Check(zap.DebugLevel, "palmgate consent"); c != nil {
		c.Write(zap.Bool("allowed", redirect.Code != ""))
	}
	s.setLoginCookie(w, id, "", -1) // the login is over
	s.answerClient(w, r, redirect)
}

// writeConsentError answers a refused consent page or form with the error page
// (writeErrorPage: plain words, the fault's status, Retry-After for a temporary
// refusal, 500 for what is no fault, logged).
func (s *Server) writeConsentError(w http.ResponseWriter, r *http.Request, err error) {
	s.writeErrorPage(w, r, err)
}

// renderConsentPage writes the consent page with a strict Content-Security-Policy:
// no script, the inline style by nonce, never framed; forms only to this origin,
// except the open form, whose answer redirects to the client (pagePolicy.toClient).
func (s *Server) renderConsentPage(w http.ResponseWriter, r *http.Request, status int, d consentPageData) {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce) // crypto/rand never fails on supported platforms
	d.CSPNonce = base64.RawStdEncoding.EncodeToString(nonce)
	d.Brand = s.brand
	s.setPageHeaders(w.Header(), pagePolicy{nonce: d.CSPNonce, formAction: "'self'", toClient: d.ToClient})
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	if err := consentPage.Execute(w, d); err != nil {
		s.logger.Debug("writing consent page", zap.Error(err))
	}
}
