package edge

import (
	"crypto/rand"
	"embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"net/http"
	"strings"

	"github.com/skip2/go-qrcode"

	"github.com/palmgate/palmgate/core/jsontime"
	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/internal/brand"
)

//go:embed pages/*.html
var pageFiles embed.FS

var challengePage = template.Must(template.ParseFS(pageFiles, "pages/challenge.html", "pages/base.html"))

// challengePageData fills the page a person sees while a palm challenge is open: the
// agent owner's registration page and the login page.
type challengePageData struct {
	// HTTPStatus is the page's status code; zero means 200.
	HTTPStatus int
	Title      string
	Lines      []template.HTML
	// Scopes are what a login asks for, listed with their words.
	Scopes      []oidc.ScopeWords
	Status      palm.Status
	StatusClass string
	// Outcome closes the page with a message; the QR code shows only while the
	// challenge is pending and the page has no outcome.
	Outcome     string
	Open        bool
	OnPhone     bool
	QR          template.URL
	ScanURL     string
	ScanExpires string
	Expires     pageTime
	Dev         bool
	DevScanURL  string
	Nonce       string
	CSPNonce    string
	Brand       brand.Brand
	// Cancel, when set, ends the palm step from the page (shown while it is open):
	// the login's Cancel, the registration's "This is not my agent".
	Cancel *pageForm
	// Gone, when set, is what the page's script shows once its poll is refused
	// (4xx): the request's records are gone, expired or already answered; GoneTodo
	// says what to do then.
	Gone, GoneTodo string
	// CancelToClient: the Cancel's answer redirects to the client's redirect_uri
	// (the login's), so the page has no CSP form-action (pagePolicy.toClient).
	CancelToClient bool
}

// challengeJSON is the page's JSON form (Accept: application/json), which its own
// script polls.
// The nonce and the scan URL appear only where the requester may complete or deny
// the challenge: the browser that started a login. ScanExpiresAt changes when the
// scan URL is renewed, which tells the page to show the new QR code.
type challengeJSON struct {
	SessionID      string         `json:"sessionId,omitempty"`
	AuthRequestID  string         `json:"authRequestId,omitempty"`
	DeviceID       string         `json:"deviceId,omitempty"`
	KeyFingerprint string         `json:"keyFingerprint,omitempty"`
	ChallengeID    string         `json:"challengeId"`
	Nonce          string         `json:"nonce,omitempty"`
	ScanURL        string         `json:"scanUrl,omitempty"`
	ScanExpiresAt  *jsontime.Time `json:"scanExpiresAt,omitempty"`
	Status         palm.Status    `json:"status"`
	ExpiresAt      jsontime.Time  `json:"expiresAt"`
}

// wantsJSON reports whether the client asked for JSON rather than a page.
func wantsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/json")
}

// renderChallengePage writes the HTML page of an open or ended challenge, with a
// strict Content-Security-Policy: no external source, inline code only by nonce.
func (s *Server) renderChallengePage(w http.ResponseWriter, r *http.Request, c *palm.Challenge, d challengePageData) {
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		s.writeError(w, r, fmt.Errorf("generating CSP nonce: %w", err))
		return
	}
	d.CSPNonce = base64.RawStdEncoding.EncodeToString(nonce)
	d.Status = c.Status
	d.Expires = clockTime(c.ExpiresAt)
	d.Brand = s.brand
	d.Open = c.Status == palm.StatusPending && d.Outcome == ""
	if !d.Open {
		d.Cancel = nil
	}
	if d.Open {
		d.ScanURL = s.palm.ScanURL(c)
		d.ScanExpires = c.ScanExpiresAt.Format()
		// On a phone the app is on the same device: the page offers its link, and a
		// QR code that could be relayed to another phone is not shown.
		if d.OnPhone = onPhone(r); !d.OnPhone {
			// Five whole pixels per module (about 250 pixels for a scan URL): crisp
			// module edges for a camera, where a fixed size would make them uneven.
			png, err := qrcode.Encode(d.ScanURL, qrcode.Medium, -5)
			if err != nil {
				s.writeError(w, r, fmt.Errorf("encoding QR code: %w", err))
				return
			}
			d.QR = template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(png))
		}
		if s.palm.Dev() {
			d.Dev, d.Nonce = true, c.Nonce
			d.DevScanURL = "/v1/palm/challenges/" + c.ID + "/dev-scan"
		}
	}
	s.setPageHeaders(w.Header(), pagePolicy{nonce: d.CSPNonce, script: true, images: "data:", connect: true, formAction: "'self'", toClient: d.Cancel != nil && d.CancelToClient})
	if d.HTTPStatus != 0 {
		w.WriteHeader(d.HTTPStatus)
	}
	if err := challengePage.Execute(w, d); err != nil {
		s.logger.Debug("writing challenge page")
	}
}

func time2clock(t jsontime.Time) string { return t.Format()[11:19] }
