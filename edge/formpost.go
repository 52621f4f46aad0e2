package edge

import (
	"crypto/sha256"
	"encoding/base64"
	"html/template"
	"net/http"
	"net/url"

	"github.com/palmgate/palmgate/core/oidc"
)

// formPostScript submits the form of the form_post page. It is the page's only
// script, admitted by the hash of exactly this text (formPostScriptHash).
const formPostScript = `document.forms[0].submit();`

// formPostScriptHash is the CSP source of formPostScript.
var formPostScriptHash = func() string {
	sum := sha256.Sum256([]byte(formPostScript))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}()

// formPostPage is the answer of an authorization request in response mode
// form_post (OAuth 2.0 Form Post Response Mode): a form of the response parameters
// that its script POSTs to the redirect_uri at once (a button does without script).
var formPostPage = template.Must(template.New("formpost").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="referrer" content="no-referrer">
<title>Back to the application</title></head>
<body><form method="post" action="{{.Action}}">
{{range .Fields}}<input type="hidden" name="{{.Name}}" value="{{.Value}}">
{{end}}<noscript><button type="submit">Continue to the application</button></noscript>
</form><script>` + formPostScript + `</script></body></html>
`))

type formPostField struct{ Name, Value string }

// answerClient sends the answer of an authorization request back to the client: a
// 302 to the redirect_uri in query mode, the auto-submitting form in form_post.
func (s *Server) answerClient(w http.ResponseWriter, r *http.Request, redirect *oidc.Redirect) {
	if redirect.Confirm {
		s.confirmAnswer(w, r, redirect, "The sign-in that brought you here expired before a palm scan answered it.")
		return
	}
	setNoStore(w)
	if !redirect.FormPost() {
		http.Redirect(w, r, redirect.URL(), http.StatusFound)
		return
	}
	data := struct {
		Action string
		Fields []formPostField
	}{Action: redirect.URI}
	for _, name := range []string{"code", "error", "error_description", "state", "iss"} {
		if v := redirect.Params().Get(name); v != "" {
			data.Fields = append(data.Fields, formPostField{name, v})
		}
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	ancestors := frameAncestorSource(redirect.URI)
	// No form-action: the form posts to the redirect_uri, whose answer may redirect
	// on to any origin, and Chromium holds those redirects to form-action too
	// (third review). The values are escaped; the only script is admitted by hash.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src "+formPostScriptHash+"; base-uri 'none'; frame-ancestors "+ancestors)
	h.Set("X-Content-Type-Options", "nosniff")
	if ancestors == "'none'" {
		h.Set("X-Frame-Options", "DENY") // it cannot name an origin: set only when no frame may load the page
	}
	h.Set("Referrer-Policy", "no-referrer")
	if err := formPostPage.Execute(w, data); err != nil {
		s.logger.Debug("writing form_post page")
	}
}

// setNoStore keeps an answer out of caches and the browser's history store:
// every answer of the authorization endpoint, and every answer that carries a
// code or an error with the client's state back to it (RFC 6749 5.1 asks it of
// tokens; Pragma for HTTP/1.0 caches, as the token endpoint sends it).
func setNoStore(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
}

// noStore is h with setNoStore on all its answers.
func noStore(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		setNoStore(w)
		h(w, r)
	}
}

// frameAncestorSource is the CSP frame-ancestors source of the form_post page
// that answers redirect URI uri: uri's origin when it is http(s), else 'none'.
// The page is the answer to prompt=none too, which applications load in a hidden
// iframe of their own page (silent renewal): only the client's own origin may
// frame it: it receives the code anyway, and the page only posts it there.
func frameAncestorSource(uri string) string {
	u, err := url.Parse(uri) // validated at configuration
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return "'none'"
	}
	return u.Scheme + "://" + u.Host
}

// confirmRedirect answers an authorization error of a client an anonymous
// registrant described (oidc.RedirectError.Confirm): a 400 page that says the
// request was refused and names the host it would go back to, whose one link
// goes on with the error. An automatic redirect would take anyone's link to
// palmgate on to any page its registrant chose, under the issuer's name (RFC 9700
// 4.11.2). The link is the answer in query mode, also for form_post: a person's
// click is a GET.
func (s *Server) confirmRedirect(w http.ResponseWriter, r *http.Request, back *oidc.RedirectError) {
	s.confirmAnswer(w, r, back.Redirect(s.oidc.Issuer()), "The sign-in request that brought you here was refused before you were asked anything.")
}

// confirmAnswer shows answer, an error to a client an anonymous registrant
// described, as a 400 page whose one link goes on with it (confirmRedirect; a
// login whose scan expired, oidc.Redirect.Confirm); what says what happened.
func (s *Server) confirmAnswer(w http.ResponseWriter, r *http.Request, answer *oidc.Redirect, what string) {
	answer.Mode = oidc.ResponseModeQuery
	host := boundRunes(oidc.RedirectDestination(answer.URI), 100) // an app's scheme, not a host, for a private-use one
	setNoStore(w)
	s.renderErrorPage(w, r, http.StatusBadRequest, errorPageData{
		Title: "Sign-in refused", StatusClass: "bad",
		What: what,
		Todo: []string{
			"It came from an application that registered itself with this service, not with its operator, and asks to be answered at " + host + ".",
			"Continue only if you know " + host + " and meant to sign in there; otherwise close this page.",
		},
		ActionLink: template.URL(answer.URL()), ActionText: "Continue to " + host, // a registered redirect URI (oidc.CheckClientRedirectURI)
		Code: answer.Error, Detail: boundRunes(answer.Description, maxDetailRunes),
	})
}
