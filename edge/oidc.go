package edge

import (
	"encoding/json"
	"errors"
	"html/template"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/core/palm"
)

// Realm names palmgate in WWW-Authenticate challenges.
const Realm = "palmgate"

// oauthErrorBody is the RFC 6749 error body.
type oauthErrorBody struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

// MarshalJSON writes the body with its error_description in RFC 6749 5.2's
// characters (oidc.DescriptionChars): messages quote the request with %q.
func (b oauthErrorBody) MarshalJSON() ([]byte, error) {
	type plain oauthErrorBody
	b.Description = oidc.DescriptionChars(b.Description)
	return json.Marshal(plain(b))
}

// writeOAuthError is the OAuth dialect's mapper, the one place that maps errors
// to it: a redirect (or form_post page) for an authorization error that goes back
// to the client (*oidc.RedirectError); otherwise {"error","error_description"}
// with the status of the fault's class: temporarily_unavailable with Retry-After
// for a temporary refusal (503, or 429 for a network at its cap of pending
// logins; the store's outage included), invalid_request for a body too large or of
// the wrong type, a method the route does not serve and a path that is none (the
// mux's 405 and 404 under /oauth2: RFC 6749 has no code of its own for them, and
// Hydra answers the same), the fault's own code when it is of OAuth's vocabulary (with a
// Basic challenge for invalid_client), and 500 server_error for the rest.
func (s *Server) writeOAuthError(w http.ResponseWriter, r *http.Request, err error) {
	f, ok := fault.As(err)
	switch {
	case !ok || f.Class == fault.Internal:
	case f.Class == fault.Unavailable || f.Class == fault.TooMany:
		if f.RetryAfter > 0 {
			setRetryAfter(w, f.RetryAfter)
		}
		writeJSON(w, Status(f.Class), oauthErrorBody{Error: oidc.TemporarilyUnavailable, Description: f.Message})
		return
	case f.Class == fault.TooLarge || f.Class == fault.UnsupportedMedia || f.Class == fault.MethodNotAllowed ||
		f.Class == fault.NotFound && f.Code == codeNotFound: // the edge's own: a body, a method, a path
		writeJSON(w, Status(f.Class), oauthErrorBody{Error: oidc.ErrInvalidRequest, Description: f.Message})
		return
	case oidc.IsOAuthCode(f.Code):
		var back *oidc.RedirectError
		if errors.As(err, &back) {
			if back.Confirm {
				s.confirmRedirect(w, r, back)
				return
			}
			s.answerClient(w, r, back.Redirect(s.oidc.Issuer()))
			return
		}
		if f.Code == oidc.ErrInvalidClient {
			w.Header().Set("WWW-Authenticate", `Basic realm="`+Realm+`"`)
		}
		writeJSON(w, Status(f.Class), oauthErrorBody{Error: f.Code, Description: f.Message})
		return
	}
	s.logger.Error("palmgate oauth request failed", zap.String("path", logPath(r)), zap.Error(err))
	writeJSON(w, http.StatusInternalServerError, oauthErrorBody{Error: "server_error", Description: "internal server error"})
}

// formParams returns the parameters of a GET query or of a POSTed form, bounded.
func formParams(w http.ResponseWriter, r *http.Request) (url.Values, error) {
	if r.Method == http.MethodGet {
		return r.URL.Query(), nil
	}
	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mediaType != "application/x-www-form-urlencoded" {
		return nil, fault.New(fault.Invalid, oidc.ErrInvalidRequest, "Content-Type must be application/x-www-form-urlencoded")
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	if err := r.ParseForm(); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, fault.New(fault.TooLarge, codeBodyTooLarge, "the form body is larger than 64 KiB")
		}
		return nil, fault.New(fault.Invalid, oidc.ErrInvalidRequest, "the form body is malformed")
	}
	return r.PostForm, nil
}

func (s *Server) handleAuthorize(w http.ResponseWriter, r *http.Request) {
	params, err := formParams(w, r)
	if err != nil {
		s.writeOAuthOrPage(w, r, err)
		return
	}
	binding, err := newBinding()
	if err != nil {
		s.writeOAuthOrPage(w, r, err)
		return
	}
	ar, err := s.oidc.Authorize(r.Context(), params, s.browserOf(r, binding))
	if err != nil {
		s.writeOAuthOrPage(w, r, err)
		return
	}
	if ar.Answer != nil { // the SSO session answered: no scan, no page
		s.answerClient(w, r, ar.Answer)
		return
	}
	s.setLoginCookie(w, ar.ID, binding, int(time.Until(ar.ExpiresAt.Add(palm.Grace)).Seconds()))
	if ar.Status == oidc.RequestConsent {
		http.Redirect(w, r, s.issuer+"/oauth2/consent?auth_request_id="+ar.ID, http.StatusFound)
		return
	}
	http.Redirect(w, r, s.issuer+"/oauth2/verify?auth_request_id="+ar.ID, http.StatusFound)
}

// handleLoginPage is the login page of an authorization request: the QR code while the
// palm challenge is open, then the redirect back to the application (the state
// machine is oidc.Service.LoginPage). Only the browser that made the request (its
// login cookie) sees the nonce and gets the code; a HEAD request changes nothing.
func (s *Server) handleLoginPage(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("auth_request_id")
	head := r.Method == http.MethodHead
	asJSON := wantsJSON(r)
	binding := s.loginBinding(r, id)
	step, err := s.oidc.LoginPage(r.Context(), id, binding, oidc.LoginOptions{Renew: !head, Finish: !head && !asJSON, Session: s.sessionID(r)})
	if err != nil {
		s.writeOAuthOrPage(w, r, err)
		return
	}
	st := step.State
	c := st.Challenge
	switch {
	case asJSON:
		body := challengeJSON{AuthRequestID: st.Request.ID, ChallengeID: c.ID, Status: c.Status, ExpiresAt: c.ExpiresAt}
		if st.Bound {
			body.Nonce, body.ScanURL, body.ScanExpiresAt = c.Nonce, s.palm.ScanURL(c), &c.ScanExpiresAt
		}
		writeJSON(w, http.StatusOK, body)
	case !st.Bound:
		s.renderChallengePage(w, r, c, challengePageData{
			HTTPStatus: http.StatusForbidden, Title: "Sign in with your palm", StatusClass: "bad",
			Outcome: "This sign-in was started in another browser. Finish it there, or start again from the application.",
		})
	case step.Redirect != nil:
		s.setLoginCookie(w, id, "", -1)
		// A verified scan starts the browser's SSO session (sso_session on).
		if step.Session != nil {
			s.setSessionCookie(w, step.Session.ID, step.Session.ExpiresAt)
		}
		s.answerClient(w, r, step.Redirect)
	default:
		s.renderChallengePage(w, r, c, challengePageData{
			Title: "Sign in with your palm", Lines: append(loginLines(s.oidc.ClientName(st.Request), st.Request.Resource, c.Request.ClientNotice, st.Request.RedirectURI), actorLines(st.Request.RequestedActor, s.oidc.ActorGrantEnd(st.Request))...),
			Scopes: oidc.DescribeScopeList(st.Request.Scopes),
			Cancel: &pageForm{Action: "/oauth2/verify/cancel", Label: "Cancel and go back to the application", Fields: []formPostField{
				{"auth_request_id", st.Request.ID}, {"csrf_token", oidc.CancelToken(binding, st.Request.ID)},
			}},
			CancelToClient: true,
			Gone:           "This sign-in has expired or has already ended.",
			GoneTodo:       "Go back to the application and sign in again.",
		})
	}
}

// loginLines names the application that asks (the scopes follow as a list), the
// resource it asks to reach as the person, whether a developer rather than the
// operator registered it (notice: the words that say so, which name the host of a
// client ID metadata document), and the app the answer goes to when redirectURI
// is a private-use scheme's (appDestination).
func loginLines(clientName, resource, notice, redirectURI string) []template.HTML {
	lines := []template.HTML{
		template.HTML("<b>" + template.HTMLEscapeString(clientName) + "</b> asks you to sign in with your palm. It receives:"),
	}
	if notice != "" {
		lines = []template.HTML{
			template.HTML("<b>" + template.HTMLEscapeString(clientName) + "</b> (<span id=\"self-registered\">" +
				template.HTMLEscapeString(notice) + "</span>) asks you to sign in with your palm. It receives:"),
		}
	}
	if resource != "" {
		lines = append(lines, template.HTML(template.HTMLEscapeString(oidc.DescribeResource(resource))))
	}
	return prependAppDestination(lines, redirectURI)
}

// prependAppDestination puts before a login or consent page's lines (which end
// with the scopes the application receives), for a redirect URI of a private-use
// scheme, the app the answer goes to, by its scheme and authority
// (oidc.RedirectDestination): any app may claim a scheme (RFC 8252 8.6), so the
// person is shown which one will receive the code and may notice an impostor
// (fourth review). Nothing for a web redirect URI.
func prependAppDestination(lines []template.HTML, redirectURI string) []template.HTML {
	if !oidc.PrivateUseRedirect(redirectURI) {
		return lines
	}
	dest := boundRunes(oidc.RedirectDestination(redirectURI), 100)
	return append([]template.HTML{template.HTML(`This sign-in is for the app that opens <b id="app-destination">` +
		template.HTMLEscapeString(dest) + `</b>: go on only if that is the app you are using.`)}, lines...)
}

// handleToken is the token endpoint: oidc.Service.Token owns its rules; the edge
// reads the form and the Basic credentials, and answers.
func (s *Server) handleToken(w http.ResponseWriter, r *http.Request) {
	req, ok := s.clientRequest(w, r)
	if !ok {
		return
	}
	resp, err := s.oidc.Token(r.Context(), req)
	if err != nil {
		s.limiter.charge(r) // failed token calls count against the client's rate limit
		s.writeOAuthError(w, r, err)
		return
	}
	w.Header().Set("Pragma", "no-cache")
	writeJSONBody(w, http.StatusOK, resp.AppendJSON(nil))
}

// handleUserinfo answers the claims of the bearer token's subject: `sub`, and the
// pseudonymous preferred_username when the token has scope profile.
func (s *Server) handleUserinfo(w http.ResponseWriter, r *http.Request) {
	claims, err := s.userinfoClaims(w, r)
	if err != nil {
		writeChallenge(w, Realm, err, s.logger)
		return
	}
	s.tokenOrigin(w, r, claims.ClientID) // the claims only to the token's client's pages (cors.go)
	body := map[string]string{"sub": claims.Subject}
	for k, v := range oidc.ProfileClaims(claims.Subject, strings.Fields(claims.Scope)) {
		body[k] = v
	}
	writeJSON(w, http.StatusOK, body)
}

// userinfoClaims checks the access token of a userinfo request: in the
// Authorization header, or, in a POST, as the form body's access_token (RFC 6750
// 2.2; OIDC Core 5.3.1 takes POST, and the conformance suite sends it so). Never
// both, nor twice (RFC 6750 2: one method per request): invalid_request.
func (s *Server) userinfoClaims(w http.ResponseWriter, r *http.Request) (*bearer.Claims, error) {
	scopes := []string{oidc.ScopeOpenID}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); r.Method == http.MethodPost && mt == "application/x-www-form-urlencoded" {
		params, err := formParams(w, r)
		if err != nil {
			return nil, err
		}
		if tokens := params["access_token"]; len(tokens) > 0 {
			switch {
			case len(tokens) > 1:
				return nil, fault.New(fault.Invalid, bearer.CodeInvalidRequest, "access_token is given more than once")
			case len(r.Header.Values("Authorization")) > 0:
				return nil, fault.New(fault.Invalid, bearer.CodeInvalidRequest, "the request sends an access token both in the Authorization header and in the body")
			}
			token := tokens[0]
			if len(token) > 8<<10 {
				token = ""
			}
			return s.oidc.AccessVerifier().Check(r.Context(), token, "", scopes)
		}
	}
	return CheckBearer(r, s.oidc.AccessVerifier(), "", scopes)
}

// bearerToken reads the token of an Authorization header's value `Bearer <token>`
// (RFC 6750 2.1).
func bearerToken(authorization string) (string, bool) {
	scheme, token, ok := strings.Cut(authorization, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != "" && len(token) <= 8<<10
}

func (s *Server) handleDiscovery(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.oidc.Discovery())
}

func (s *Server) handleJWKS(w http.ResponseWriter, r *http.Request) {
	body, err := json.Marshal(map[string]any{"keys": s.keys.JWKS()})
	if err != nil {
		s.writeOAuthError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age="+strconv.Itoa(300))
	_, _ = w.Write(body)
}

// clientRequest reads the form and Basic credentials of a client-authenticated POST
// (the token, introspection and revocation endpoints), answering the error itself
// when it fails. A client address out of failures is refused before any work:
// failures count against its rate limit, so secrets cannot be guessed quickly.
func (s *Server) clientRequest(w http.ResponseWriter, r *http.Request) (oidc.ClientRequest, bool) {
	if refused := s.limiter.admits(r); refused != nil {
		s.writeOAuthError(w, r, refused)
		return oidc.ClientRequest{}, false
	}
	params, err := formParams(w, r)
	if err != nil {
		s.limiter.charge(r)
		s.writeOAuthError(w, r, err)
		return oidc.ClientRequest{}, false
	}
	if !s.clientOrigin(w, r, requestClientID(r, params)) {
		s.limiter.charge(r)
		s.writeOAuthError(w, r, fault.New(fault.Invalid, oidc.ErrInvalidRequest, "this client does not allow requests from the page's origin (allowed_origins)"))
		return oidc.ClientRequest{}, false
	}
	req := oidc.ClientRequest{Params: params}
	if id, secret, ok := r.BasicAuth(); ok {
		req.Basic = &oidc.BasicCredentials{ID: id, Secret: secret}
	}
	return req, true
}
