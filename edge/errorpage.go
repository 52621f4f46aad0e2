package edge

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"html/template"
	"net/http"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/agent"
	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/internal/brand"
	"github.com/palmgate/palmgate/internal/negotiate"
)

// The error page: what a person sees, in a browser, where an API caller gets a
// JSON error. One template (pages/error.html, in the look of the login page) and
// one render function (renderErrorPage); pageOf is the page dialect's mapper,
// which says in plain words what went wrong and what the person can do, with the
// technical code and message in small print.
//
// Content negotiation (acceptsHTML): a page when the request's Accept header
// names text/html (with a q above zero), as every browser's navigation does, and
// does not name application/json; otherwise the route's JSON error. An app, a
// script or curl that sends no Accept, */* or application/json gets JSON.

var errorPage = template.Must(template.ParseFS(pageFiles, "pages/error.html", "pages/base.html"))

// maxDetailRunes bounds the fault message shown in the page's small print: it may
// quote what the request carried (escaped by the template).
const maxDetailRunes = 200

// errorPageData fills the error page.
type errorPageData struct {
	Title string
	// What says in plain words what went wrong; Todo what the person can do.
	What string
	Todo []string
	// StatusClass colours What: "bad" (the default of an error), "ok" or "".
	StatusClass string
	// ActionURL and ActionText, when set, are the page's one button.
	ActionURL, ActionText string
	// ActionLink, instead of ActionURL, is a client's registered redirect URI
	// (validated: no script or content scheme), which may be an app's private-use
	// scheme (RFC 8252 7.1) that the template would otherwise replace.
	ActionLink template.URL
	// Code and Detail are the technical code and message, in small print.
	Code, Detail string
	HTTPStatus   int
	CSPNonce     string
	// Brand is the operator's brand, as on every page.
	Brand brand.Brand
}

// acceptsHTML reports whether r asks for a page rather than JSON: its Accept
// header names text/html and not application/json (see the rule above; the
// portal follows it too).
func acceptsHTML(r *http.Request) bool { return negotiate.AcceptsHTML(r) }

// negotiated is write (a route's JSON dialect) for API callers and the error page
// for browsers (acceptsHTML). An authorization error that goes back to the client
// (a redirect) is write's in both cases.
func (s *Server) negotiated(write errorWriter) errorWriter {
	return func(w http.ResponseWriter, r *http.Request, err error) {
		var back *oidc.RedirectError
		if acceptsHTML(r) && !errors.As(err, &back) && r.Context().Err() == nil {
			s.writeErrorPage(w, r, err)
			return
		}
		write(w, r, err)
	}
}

// writeErrorPage answers err with the error page (pageOf), Retry-After when the
// fault says when to retry; what is no fault is logged and answered 500.
func (s *Server) writeErrorPage(w http.ResponseWriter, r *http.Request, err error) {
	status, d, f := pageOf(err)
	if status == http.StatusInternalServerError {
		s.logger.Error("palmgate request failed", zap.String("method", r.Method), zap.String("path", logPath(r)), zap.Error(err))
	}
	if f != nil && f.RetryAfter > 0 && (f.Class == fault.TooMany || f.Class == fault.Unavailable) {
		setRetryAfter(w, f.RetryAfter)
	}
	s.renderErrorPage(w, r, status, d)
}

// renderErrorPage writes the error page with status and a strict
// Content-Security-Policy: no script, no external source, the inline style by
// nonce. HEAD gets the headers only.
func (s *Server) renderErrorPage(w http.ResponseWriter, r *http.Request, status int, d errorPageData) {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce) // crypto/rand never fails on supported platforms
	d.CSPNonce = base64.RawStdEncoding.EncodeToString(nonce)
	d.Brand = s.brand
	if d.HTTPStatus == 0 && status != http.StatusOK {
		d.HTTPStatus = status
	}
	s.setPageHeaders(w.Header(), pagePolicy{nonce: d.CSPNonce})
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	if err := errorPage.Execute(w, d); err != nil {
		s.logger.Debug("writing error page", zap.Error(err))
	}
}

// goBack is what a person can do about most refused sign-ins.
var goBack = []string{"Go back to the application and try again. If it happens again, tell the application's developer: its sign-in link is not right."}

// pageOf is the page dialect's mapper: err's status (by its fault's class, as
// every dialect), and the page that says it in plain words, with the fault's code
// and message (bounded) in small print. What is no fault is a 500 without detail.
func pageOf(err error) (int, errorPageData, *fault.Error) {
	f, ok := fault.As(err)
	if !ok || f.Class == fault.Internal {
		return http.StatusInternalServerError, errorPageData{
			Title: "Something went wrong", StatusClass: "bad",
			What: "palmgate could not complete this request because of a problem on its side.",
			Todo: []string{"Try again in a few minutes."},
			Code: "server_error", Detail: "internal server error",
		}, nil
	}
	d := errorPageData{StatusClass: "bad", Code: f.Code, Detail: boundRunes(f.Message, maxDetailRunes)}
	switch {
	case errors.Is(err, oidc.ErrUnknownClient):
		d.Title = "This application is not known here"
		d.What = "The link that brought you here names an application that is not registered with this sign-in service, so the sign-in cannot start."
		d.Todo = goBack
	case errors.Is(err, oidc.ErrRedirectURINotRegistered):
		d.Title = "This sign-in link is not valid"
		d.What = "The application asked to send you back to an address that is not registered for it. The sign-in stopped here to protect you: nothing was shared."
		d.Todo = goBack
	case errors.Is(err, oidc.ErrUnknownAuthRequest):
		d.Title = "This sign-in has expired"
		d.What = "This sign-in is unknown here or has expired: a sign-in lasts a few minutes."
		d.Todo = []string{"Go back to the application and sign in again."}
	case errors.Is(err, oidc.ErrRequestAnswered):
		d.Title = "This sign-in is already finished"
		d.What = "This sign-in was already completed or declined, and its page cannot be used again."
		d.Todo = []string{"Go back to the application. If you are not signed in there, sign in again."}
	case errors.Is(err, oidc.ErrOtherBrowser):
		d.Title = "Started in another browser"
		d.What = "This sign-in was started in another browser, and only that browser can finish it."
		d.Todo = []string{"Finish it there, or start again from the application."}
	case errors.Is(err, oidc.ErrBadConsentToken):
		d.Title = "This form is not valid"
		d.What = "The answer to the consent form did not come from this sign-in's page, so it was not taken: nothing was shared."
		d.Todo = []string{"Go back to the application and sign in again."}
	case errors.Is(err, agent.ErrSessionNotFound):
		d.Title = "This registration link is not valid"
		d.What = "No agent registration is waiting at this address: the link is wrong, or the registration ended more than a day ago."
		d.Todo = []string{"Ask your agent to start its registration again, and open the new link it prints."}
	case errors.Is(err, palm.ErrNotFound):
		d.Title = "This palm scan link is not valid"
		d.What = "No palm scan is waiting at this address."
		d.Todo = []string{"Go back to the sign-in page and use the code or the link it shows now."}
	default:
		d.Title, d.What, d.Todo = classWords(f.Class)
	}
	return Status(f.Class), d, f
}

// classWords say in plain words what a refusal of class means to a person, and
// what they can do.
func classWords(c fault.Class) (title, what string, todo []string) {
	switch c {
	case fault.NotFound:
		return "Page not found", "There is nothing at this address.",
			[]string{"Check the address, or go back to the application you came from."}
	case fault.Gone:
		return "This link has expired", "The link that brought you here was valid only for a short time.",
			[]string{"Go back to the page you came from: it shows a fresh code or link."}
	case fault.Conflict:
		return "This request is already finished", "What this page asked for was already completed or declined.",
			[]string{"Go back to the application you came from."}
	case fault.TooMany:
		return "Too many attempts", "Too many requests came from your network in a short time, so this one was refused.",
			[]string{"Wait a minute, then try again."}
	case fault.Unavailable:
		return "Temporarily unavailable", "The sign-in service cannot take this request right now.",
			[]string{"Try again in a few minutes."}
	case fault.Unauthorized, fault.Forbidden:
		return "Not allowed", "This request was refused.",
			[]string{"Go back to the application and start again."}
	case fault.MethodNotAllowed:
		return "This page cannot be used this way", "The address is right, but it does not answer this kind of request.",
			[]string{"Go back to the application you came from."}
	}
	return "This request is not valid", "The link or form that brought you here is incomplete or malformed.", goBack
}

// boundRunes returns s cut to at most n runes, with an ellipsis when cut.
func boundRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// writeOAuthOrPage answers err in the OAuth dialect, or with the error page to a
// browser: the routes a person lands on (authorize, the login page).
func (s *Server) writeOAuthOrPage(w http.ResponseWriter, r *http.Request, err error) {
	s.negotiated(s.writeOAuthError)(w, r, err)
}

// writeV1OrPage answers err in the /v1 dialect, or with the error page to a
// browser: the registration page, the scan URL, unknown paths.
func (s *Server) writeV1OrPage(w http.ResponseWriter, r *http.Request, err error) {
	s.negotiated(s.writeError)(w, r, err)
}
