package caddymodule

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

	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/core/palm"
)

// realm names palmgate in WWW-Authenticate challenges.
const realm = "palmgate"

// oauthErrorBody is the RFC 6749 error body.
type oauthErrorBody struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

// writeOAuthError answers an OAuth error: a redirect when it carries a redirect_uri,
// otherwise JSON with 401 for client authentication and 400 for the rest.
func (a *App) writeOAuthError(w http.ResponseWriter, r *http.Request, err error) {
	var tooLarge *apiError
	if errors.As(err, &tooLarge) {
		writeJSON(w, tooLarge.Status, oauthErrorBody{Error: oidc.ErrInvalidRequest, Description: tooLarge.Message})
		return
	}
	if d, ok := retryAfter(err); ok {
		setRetryAfter(w, d)
		writeJSON(w, http.StatusServiceUnavailable, oauthErrorBody{Error: "temporarily_unavailable", Description: a.errorFor(err).Message})
		return
	}
	switch {
	case errors.Is(err, oidc.ErrOtherBrowser):
		writeJSON(w, http.StatusForbidden, oauthErrorBody{Error: oidc.ErrAccessDenied, Description: err.Error() + "; finish it there, or start again here"})
		return
	}
	var oe *oidc.Error
	if !errors.As(err, &oe) {
		a.logger.Error("palmgate oauth request failed", zap.String("path", r.URL.Path), zap.Error(err))
		writeJSON(w, http.StatusInternalServerError, oauthErrorBody{Error: "server_error", Description: "internal server error"})
		return
	}
	if oe.RedirectURI != "" {
		redirect := &oidc.Redirect{URI: oe.RedirectURI, Error: oe.Code, State: oe.State, Issuer: a.oidc.Issuer()}
		http.Redirect(w, r, redirect.URL(), http.StatusFound)
		return
	}
	status := http.StatusBadRequest
	if oe.Code == oidc.ErrInvalidClient {
		status = http.StatusUnauthorized
		w.Header().Set("WWW-Authenticate", `Basic realm="`+realm+`"`)
	}
	writeJSON(w, status, oauthErrorBody{Error: oe.Code, Description: oe.Description})
}

// formParams returns the parameters of a GET query or of a POSTed form, bounded.
func formParams(w http.ResponseWriter, r *http.Request) (url.Values, error) {
	if r.Method == http.MethodGet {
		return r.URL.Query(), nil
	}
	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mediaType != "application/x-www-form-urlencoded" {
		return nil, &oidc.Error{Code: oidc.ErrInvalidRequest, Description: "Content-Type must be application/x-www-form-urlencoded"}
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
	if err := r.ParseForm(); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, &apiError{Status: http.StatusRequestEntityTooLarge, Message: "the form body is larger than 64 KiB", Code: codeBodyTooLarge}
		}
		return nil, &oidc.Error{Code: oidc.ErrInvalidRequest, Description: "the form body is malformed"}
	}
	return r.PostForm, nil
}

func (a *App) handleAuthorize(w http.ResponseWriter, r *http.Request) {
	params, err := formParams(w, r)
	if err != nil {
		a.writeOAuthError(w, r, err)
		return
	}
	binding, err := newBinding()
	if err != nil {
		a.writeOAuthError(w, r, err)
		return
	}
	ar, err := a.oidc.Authorize(r.Context(), params, browserOf(r, binding))
	if err != nil {
		a.writeOAuthError(w, r, err)
		return
	}
	a.setLoginCookie(w, ar.ID, binding, int(time.Until(ar.ExpiresAt.Add(palm.Grace)).Seconds()))
	http.Redirect(w, r, a.Issuer+"/oauth2/verify?auth_request_id="+ar.ID, http.StatusFound)
}

// handleLoginPage is the login page of an authorization request: the QR code while the
// palm challenge is open, then the redirect back to the application. Only the
// browser that made the request (its login cookie) sees the nonce and gets the
// code; a HEAD request changes nothing.
func (a *App) handleLoginPage(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("auth_request_id")
	head := r.Method == http.MethodHead
	binding := a.loginBinding(r, id)
	st, err := a.oidc.Login(r.Context(), id, binding, !head)
	if err != nil {
		a.writeOAuthError(w, r, err)
		return
	}
	if st.Request.Status == oidc.RequestAnswered {
		a.writeOAuthError(w, r, &oidc.Error{Code: oidc.ErrInvalidRequest, Description: "this authorization request was already answered"})
		return
	}
	c := st.Challenge
	if wantsJSON(r) {
		body := challengeJSON{AuthRequestID: st.Request.ID, ChallengeID: c.ID, Status: c.Status, ExpiresAt: c.ExpiresAt}
		if st.Bound {
			body.Nonce, body.ScanURL, body.ScanExpiresAt = c.Nonce, a.palm.ScanURL(c), &c.ScanExpiresAt
		}
		writeJSON(w, http.StatusOK, body)
		return
	}
	if !st.Bound {
		a.renderChallengePage(w, r, c, challengePageData{
			HTTPStatus: http.StatusForbidden, Title: "Sign in with your palm", StatusClass: "bad",
			Outcome: "This sign-in was started in another browser. Finish it there, or start again from the application.",
		})
		return
	}
	if c.Status != palm.StatusPending && !head {
		redirect, err := a.oidc.Finish(r.Context(), id, binding)
		if err != nil {
			a.writeOAuthError(w, r, err)
			return
		}
		if redirect != nil {
			a.setLoginCookie(w, id, "", -1) // the login is over
			http.Redirect(w, r, redirect.URL(), http.StatusFound)
			return
		}
	}
	a.renderChallengePage(w, r, c, challengePageData{Title: "Sign in with your palm", Lines: loginLines(a.oidc.ClientName(st.Request), st.Request.Scopes)})
}

// loginLines tells the person, in words, what the application asks for.
func loginLines(clientName string, scopes []string) []template.HTML {
	lines := []template.HTML{
		template.HTML("<b>" + template.HTMLEscapeString(clientName) + "</b> asks you to sign in with your palm. It receives:"),
	}
	for _, words := range oidc.DescribeScopes(scopes) {
		lines = append(lines, template.HTML(template.HTMLEscapeString(words)))
	}
	return lines
}

func (a *App) handleToken(w http.ResponseWriter, r *http.Request) {
	clientID, params, ok := a.clientRequest(w, r)
	if !ok {
		return
	}
	var err error
	var resp *oidc.TokenResponse
	switch params.Get("grant_type") {
	case "authorization_code":
		resp, err = a.oidc.ExchangeCode(r.Context(), clientID, params.Get("code"), params.Get("redirect_uri"), params.Get("code_verifier"), params["resource"]...)
	case "refresh_token":
		resp, err = a.oidc.Refresh(r.Context(), clientID, params.Get("refresh_token"), params.Get("scope"), params["resource"]...)
	case "":
		err = &oidc.Error{Code: oidc.ErrInvalidRequest, Description: "grant_type is required"}
	default:
		err = &oidc.Error{Code: oidc.ErrUnsupportedGrantType, Description: "grant_type must be authorization_code or refresh_token"}
	}
	if err != nil {
		a.limiter.charge(r) // failed token calls count against the client's rate limit
		a.writeOAuthError(w, r, err)
		return
	}
	w.Header().Set("Pragma", "no-cache")
	writeJSON(w, http.StatusOK, resp)
}

// authenticateClient accepts client_secret_post and client_secret_basic, not both.
func (a *App) authenticateClient(r *http.Request, params url.Values) (string, error) {
	id, secret, basic := r.BasicAuth()
	if basic {
		if params.Has("client_secret") {
			return "", &oidc.Error{Code: oidc.ErrInvalidRequest, Description: "use one client authentication method, not two"}
		}
		var err1, err2 error
		id, err1 = url.QueryUnescape(id) // RFC 6749 2.3.1
		secret, err2 = url.QueryUnescape(secret)
		if err1 != nil || err2 != nil {
			return "", &oidc.Error{Code: oidc.ErrInvalidClient, Description: "malformed basic credentials"}
		}
		if formID := params.Get("client_id"); formID != "" && formID != id {
			return "", &oidc.Error{Code: oidc.ErrInvalidRequest, Description: "client_id differs from the authenticated client"}
		}
	} else {
		id, secret = params.Get("client_id"), params.Get("client_secret")
	}
	if err := a.oidc.AuthenticateClient(r.Context(), id, secret); err != nil {
		return "", err
	}
	return id, nil
}

// handleUserinfo answers the claims of the bearer token's subject: only `sub`.
func (a *App) handleUserinfo(w http.ResponseWriter, r *http.Request) {
	claims, refusal := checkBearer(r, a.oidc.AccessVerifier(), []string{oidc.ScopeOpenID}, realm)
	if refusal != nil {
		refusal.write(w, a.logger)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"sub": claims.Subject})
}

// bearerToken reads `Authorization: Bearer <token>` (RFC 6750 2.1).
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != "" && len(token) <= 8<<10
}

func (a *App) handleDiscovery(w http.ResponseWriter, r *http.Request) {
	iss := a.oidc.Issuer()
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                 iss,
		"authorization_endpoint": iss + "/authorize",
		"token_endpoint":         iss + "/token",
		"userinfo_endpoint":      iss + "/userinfo",
		"introspection_endpoint": iss + "/introspect",
		"revocation_endpoint":    iss + "/revoke",
		"introspection_endpoint_auth_methods_supported": []string{"client_secret_post", "client_secret_basic"},
		"revocation_endpoint_auth_methods_supported":    []string{"client_secret_post", "client_secret_basic"},
		"jwks_uri":                              iss + "/jwks",
		"response_types_supported":              []string{"code"},
		"response_modes_supported":              []string{"query"},
		"grant_types_supported":                 []string{"authorization_code", "refresh_token"},
		"subject_types_supported":               []string{"pairwise"},
		"id_token_signing_alg_values_supported": []string{keys.RS256},
		"scopes_supported":                      []string{oidc.ScopeOpenID, oidc.ScopeOfflineAccess},
		"claims_supported":                      []string{"sub", "iss", "aud", "exp", "iat", "auth_time", "nonce", "amr", "azp", "sid"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_post", "client_secret_basic"},
		"code_challenge_methods_supported":      []string{"S256"},
		"prompt_values_supported":               []string{"none", "login"},
		"request_parameter_supported":           false,
		"claims_parameter_supported":            false,
		"request_uri_parameter_supported":       false,
		"end_session_endpoint":                  iss + "/logout",

		// RFC 9207: every authorization response carries iss.
		"authorization_response_iss_parameter_supported": true,
	})
}

func (a *App) handleJWKS(w http.ResponseWriter, r *http.Request) {
	body, err := json.Marshal(map[string]any{"keys": a.keys.JWKS()})
	if err != nil {
		a.writeOAuthError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age="+strconv.Itoa(300))
	_, _ = w.Write(body)
}

// clientRequest reads a client-authenticated form POST (the token, introspection and
// revocation endpoints), answering the error itself when it fails. Failures count
// against the client address's rate limit, so secrets cannot be guessed quickly.
func (a *App) clientRequest(w http.ResponseWriter, r *http.Request) (string, url.Values, bool) {
	if !a.limiter.admits(w, r) {
		return "", nil, false
	}
	params, err := formParams(w, r)
	if err == nil {
		for name, values := range params {
			// resource (RFC 8707) may repeat; the grant handlers refuse more than one
			// with invalid_target.
			if len(values) > 1 && name != "resource" {
				err = &oidc.Error{Code: oidc.ErrInvalidRequest, Description: "parameter " + name + " is given more than once"}
				break
			}
		}
	}
	var clientID string
	if err == nil {
		clientID, err = a.authenticateClient(r, params)
	}
	if err != nil {
		a.limiter.charge(r)
		a.writeOAuthError(w, r, err)
		return "", nil, false
	}
	return clientID, params, true
}
