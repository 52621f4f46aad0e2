package demo

import (
	"crypto/rand"
	"embed"
	"encoding/base64"
	"html/template"
	"net/http"

	"go.uber.org/zap"
)

//go:embed demo.html
var pageFiles embed.FS

var demoPage = template.Must(template.ParseFS(pageFiles, "demo.html"))

// page fills demo.html. Kind is "home", "result" or "error".
type page struct {
	Kind       string
	ClientName string
	Issuer     string
	LoginURL   string

	// The result of a login: the pairwise subject, the ID token's claims and the
	// userinfo answer (indented JSON), and facts about the access token.
	Sub      string
	IDClaims string
	UserInfo string
	Access   tokenFacts

	// An error page.
	Title   string
	Message string

	CSPNonce string
}

// renderError writes the error page.
func (d *Demo) renderError(w http.ResponseWriter, status int, title, message string) {
	d.render(w, status, page{Kind: "error", ClientName: d.clientName, Issuer: d.issuer, LoginURL: d.origin + pathLogin, Title: title, Message: message})
}

// render writes p with a strict Content-Security-Policy: no external source, no
// script, the inline style only by a nonce fresh for each response.
func (d *Demo) render(w http.ResponseWriter, status int, p page) {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce) // never fails (crypto/rand)
	p.CSPNonce = base64.RawURLEncoding.EncodeToString(nonce)
	if p.ClientName == "" {
		p.ClientName = "palmgate demo app"
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'nonce-"+p.CSPNonce+"'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	if err := demoPage.Execute(w, p); err != nil && d.logger != nil {
		d.logger.Debug("palmgate_demo: writing page", zap.Error(err))
	}
}
