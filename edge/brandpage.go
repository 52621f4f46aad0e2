package edge

import (
	"net/http"
	"time"

	"github.com/palmgate/palmgate/core/jsontime"
)

// What the pages share beyond base.html: times that the page's script shows in
// the person's own time zone, and the small forms that end a palm step from the
// page itself (the login's Cancel, the registration's "This is not my agent").
// The brand (internal/brand) is Server.brand, set on every page's data.

// pageTime is an instant as the pages print it (template "time" of base.html):
// the ISO instant in <time datetime>, which the page's script formats in the
// browser's locale, and the UTC text that stays without script.
type pageTime struct {
	ISO, UTC string
	// Form is "time" (a time of today: an expiry) or "date" (date and time).
	Form string
}

// clockTime is t as a time of day: "22:52:08 (UTC)" without script.
func clockTime(t jsontime.Time) pageTime {
	return pageTime{ISO: t.Format(), UTC: time2clock(t) + " (UTC)", Form: "time"}
}

// dateTime is t with its date: "2026-11-26 22:52:08 (UTC)" without script.
func dateTime(t jsontime.Time) pageTime {
	return pageTime{ISO: t.Format(), UTC: time.Time(t).UTC().Format("2006-01-02 15:04:05") + " (UTC)", Form: "date"}
}

// pageForm is a one-button form a page POSTs to end its palm step: hidden fields
// (the CSRF token among them) and the button's label.
type pageForm struct {
	Action, Label string
	Fields        []formPostField
}

// cspImgSrc is the img-src directive of a page that shows images from sources
// (space separated; "" for none) and the brand's logo: "; img-src ..." or "".
func (s *Server) cspImgSrc(sources string) string {
	if v := s.brand.WithImgSrc(sources); v != "" {
		return "; img-src " + v
	}
	return ""
}

// pagePolicy is what one of palmgate's pages admits beyond its own nonce'd style:
// its Content-Security-Policy is built from it by setPageHeaders.
type pagePolicy struct {
	nonce      string // the page's nonce, for its style (and script)
	script     bool   // a nonce'd script runs (script-src)
	images     string // img-src sources besides the brand's logo ("data:" for a QR code)
	connect    bool   // the script calls palmgate itself (connect-src 'self')
	formAction string // form-action sources; "" is 'none'
	// toClient leaves form-action out: the page's form is answered by a redirect
	// to the client's redirect_uri, whose callback may redirect on to any origin,
	// and Chromium holds every redirect after a form's POST to form-action (third
	// review). Every value on such a page is escaped, and script runs by nonce.
	toClient bool
}

// setPageHeaders sets the headers every page of palmgate's sends: HTML, never
// stored, never framed (frame-ancestors 'none' and X-Frame-Options), no referrer,
// no sniffing, and a CSP that admits only what p names.
func (s *Server) setPageHeaders(h http.Header, p pagePolicy) {
	csp := "default-src 'none'" + s.cspImgSrc(p.images) + "; style-src 'nonce-" + p.nonce + "'"
	if p.script {
		csp += "; script-src 'nonce-" + p.nonce + "'"
	}
	if p.connect {
		csp += "; connect-src 'self'"
	}
	if !p.toClient {
		formAction := p.formAction
		if formAction == "" {
			formAction = "'none'"
		}
		csp += "; form-action " + formAction
	}
	csp += "; base-uri 'none'; frame-ancestors 'none'"
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
}
