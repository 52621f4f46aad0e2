package portal

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/oidc"
)

// form is what a form of the portal holds: an application's values, or what the
// developer typed, shown again when the form fails so nothing typed is lost.
type form struct {
	// For names the form that failed ("create", "edit" or "rotate"), and Error why.
	For, Error string

	Name, RedirectURIs, PostLogoutRedirectURIs, IDTokenAlg, AccessTokenAudience, AllowedOrigins string
	BackchannelLogoutURI                                                                        string
	Public                                                                                      bool
	// Grace is the rotate form's grace period, a duration as the CLI takes it.
	Grace string
}

// defaultGrace is the rotate form's grace period until the developer types one.
const defaultGrace = "24h"

// clientForm is the edit form of ci.
func clientForm(ci *oidc.ClientInfo) form {
	return form{
		Name: ci.Name, RedirectURIs: strings.Join(ci.RedirectURIs, "\n"), PostLogoutRedirectURIs: strings.Join(ci.PostLogoutRedirectURIs, "\n"),
		IDTokenAlg: ci.IDTokenAlg, AccessTokenAudience: ci.AccessTokenAudience, AllowedOrigins: strings.Join(ci.AllowedOrigins, "\n"),
		BackchannelLogoutURI: ci.BackchannelLogoutURI, Grace: defaultGrace,
	}
}

// typedForm is what the developer posted in the form named which; a field the
// form lacks keeps its value in base.
func typedForm(r *http.Request, which, msg string, base form) form {
	f := base
	f.For, f.Error = which, msg
	for field, v := range map[string]*string{
		"name": &f.Name, "redirect_uris": &f.RedirectURIs, "post_logout_redirect_uris": &f.PostLogoutRedirectURIs,
		"id_token_signed_response_alg": &f.IDTokenAlg, "access_token_audience": &f.AccessTokenAudience,
		"allowed_origins": &f.AllowedOrigins, "grace": &f.Grace, "backchannel_logout_uri": &f.BackchannelLogoutURI,
	} {
		if _, ok := r.PostForm[field]; ok {
			*v = r.PostFormValue(field)
		}
	}
	f.Public = r.PostFormValue("public") == "on"
	return f
}

// parseGrace reads a grace period as the CLI and the admin API take it: a
// duration such as "24h", "90m" or "0s", days too ("1d", "1d12h"); "" is the
// default. A bare number has no unit, and is refused.
func parseGrace(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return oidc.DefaultSecretGrace, true
	}
	var days time.Duration
	if d, rest, ok := strings.Cut(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 || n > 3650 {
			return 0, false
		}
		days, s = time.Duration(n)*24*time.Hour, rest
		if s == "" {
			return days, true
		}
	}
	dur, err := time.ParseDuration(s)
	if err != nil || dur < 0 {
		return 0, false
	}
	return days + dur, true
}

// clientFault is the status and message of a registry error that is the
// developer's (a 4xx); ok is false for any other.
func clientFault(err error) (status int, msg string, ok bool) {
	var ce *fault.Error
	switch {
	case errors.Is(err, oidc.ErrClientNotFound):
		return http.StatusNotFound, "There is no such application.", true
	case !errors.As(err, &ce) || ce.Kind == nil:
		return 0, "", false
	case errors.Is(err, oidc.ErrTooManyClients):
		return http.StatusConflict, ce.Message, true
	default:
		return http.StatusBadRequest, ce.Message, true
	}
}

// createFailed answers a failed creation with the home page, the form filled
// with what was typed and the reason beside it.
func (p *Portal) createFailed(w http.ResponseWriter, r *http.Request, s *session, err error) {
	status, msg, ok := clientFault(err)
	if !ok || status == http.StatusNotFound {
		p.clientError(w, r, err)
		return
	}
	apps, lerr := p.oidc.Clients().List(r.Context(), s.HumanID)
	if lerr != nil {
		p.internal(w, r, lerr)
		return
	}
	p.render(w, r, status, &pageData{Title: "Your applications", Session: s, Apps: apps, Form: typedForm(r, "create", msg, form{})})
}

// appFormFailed answers a failed edit or rotation (which) of the session's
// application with its page, the form filled with what was typed.
func (p *Portal) appFormFailed(w http.ResponseWriter, r *http.Request, s *session, which string, status int, msg string) {
	ci := p.app(w, r, s)
	if ci == nil {
		return
	}
	p.render(w, r, status, &pageData{
		Title: ci.Name, Session: s, App: ci, Snippets: p.snippets(ci), Form: typedForm(r, which, msg, clientForm(ci)),
	})
}
