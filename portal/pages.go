package portal

import (
	"embed"
	"html/template"
	"net/http"
	"strings"

	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/internal/brand"
)

//go:embed templates/*.html
var templateFiles embed.FS

var page = template.Must(template.New("portal.html").Funcs(template.FuncMap{
	"join": strings.Join,
	"algs": func() []string { return oidc.IDTokenAlgs },
	"auds": func() []string { return oidc.AccessTokenAudiences },
	"sub1": func(n int) int { return n - 1 },
}).ParseFS(templateFiles, "templates/portal.html"))

// pageData fills the portal's one page template.
type pageData struct {
	Title    string
	Session  *session
	CSRF     string
	CSPNonce string
	Dev      bool
	Issuer   string // the OIDC issuer ({base}/oauth2)
	Discover string
	Apps     []*oidc.ClientInfo
	App      *oidc.ClientInfo
	// Secret is shown once, right after creation or rotation.
	Secret   string
	Message  string
	Error    string
	Snippets []snippet
	// Form fills the create, edit and rotate forms: an application's values, or
	// what the developer typed in the one that failed (Form.For).
	Form form
	// Brand is the operator's brand (internal/brand), as on every page.
	Brand brand.Brand
}

// NativeOnly reports whether the page's application has only private-use scheme
// redirect URIs (a native app's): its page shows no web server program.
func (d *pageData) NativeOnly() bool { return d.App != nil && webRedirect(d.App) == "" }

func (p *Portal) render(w http.ResponseWriter, r *http.Request, status int, d *pageData) {
	d.CSPNonce = randomString(16)
	d.Dev = p.dev
	d.Issuer = p.issuer + "/oauth2"
	d.Discover = d.Issuer + "/.well-known/openid-configuration"
	d.Brand = p.brand
	imgSrc := ""
	if o := p.brand.ImgSrc(); o != "" {
		imgSrc = "; img-src " + o
	}
	if d.Session != nil {
		d.CSRF = p.csrfToken(d.Session)
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'"+imgSrc+"; style-src 'nonce-"+d.CSPNonce+"'; script-src 'nonce-"+d.CSPNonce+"'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	if err := page.Execute(w, d); err != nil {
		p.logger.Debug("writing portal page")
	}
}

// fail answers status with a page that says msg; a program (Accept without
// text/html) gets it as JSON (apierrors.go).
func (p *Portal) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if !wantsPage(r) {
		failJSON(w, status, msg)
		return
	}
	p.render(w, r, status, &pageData{Title: statusText(status), Session: checkedSession(r), Error: msg})
}

// statusText is status's reason phrase as RFC 9110 names it: Go's http.StatusText
// keeps RFC 2616's for 413 and 422.
func statusText(status int) string {
	switch status {
	case http.StatusRequestEntityTooLarge:
		return "Content Too Large"
	case http.StatusUnprocessableEntity:
		return "Unprocessable Content"
	}
	return http.StatusText(status)
}

func (p *Portal) showApp(w http.ResponseWriter, r *http.Request, s *session, ci *oidc.ClientInfo, secret, msg string) {
	p.render(w, r, http.StatusOK, &pageData{
		Title: ci.Name, Session: s, App: ci, Secret: secret, Message: msg, Snippets: p.snippets(ci), Form: clientForm(ci),
	})
}
