package integration

import (
	"bytes"
	"encoding/base64"
	"html"
	"image/png"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
)

var (
	qrImgRE = regexp.MustCompile(`<img[^>]*\ssrc="(data:image/png;base64,[^"]+)"`)
	attrRE  = regexp.MustCompile(`\s(?:src|href|action|formaction)\s*=\s*["']([^"']*)["']`)
)

// TestRegistrationPage checks the owner's page: JSON for apps, and for
// browsers an HTML page carrying the scan URL as a server-made QR code PNG,
// without external assets, with the dev-mode button, and escaping what the
// agent sent.
func TestRegistrationPage(t *testing.T) {
	t.Parallel()
	e := start(t, testserver.Options{})
	const evil = `<script>alert("pwned")</script>`
	a := newAgent(t, "agent"+evil)
	s := e.initSession(t, a.registration(time.Now()))
	c := e.verifyInfo(t, s)
	if c.DeviceID != a.deviceID || c.Status != "pending" {
		t.Errorf("page JSON %+v, want deviceId %q, status pending", c, a.deviceID)
	}
	if ct := e.do(t, "GET", s.URL, nil, "Accept", "application/json").Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("page JSON Content-Type %q", ct)
	}

	for name, accept := range map[string]string{
		"no Accept": "",
		"browser":   "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
		"text/html": "text/html",
	} {
		t.Run("HTML for "+name, func(t *testing.T) {
			resp := e.do(t, "GET", s.URL, nil, "Accept", accept).ExpectStatus(t, http.StatusOK)
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
				t.Fatalf("Content-Type %q, want text/html", ct)
			}
			page := string(resp.Body)
			m := qrImgRE.FindStringSubmatch(page)
			if m == nil {
				t.Fatalf("no <img src=\"data:image/png;base64,...\"> in the page:\n%s", testserver.Snippet(resp.Body))
			}
			src := strings.TrimPrefix(html.UnescapeString(m[1]), "data:image/png;base64,") // attributes may hold entities (&#43;)
			data, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(src), ""))
			if err != nil {
				t.Fatalf("QR image is not base64: %v", err)
			}
			img, err := png.Decode(bytes.NewReader(data))
			if err != nil {
				t.Fatalf("QR image is not a PNG: %v", err)
			}
			if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
				t.Errorf("QR image is only %dx%d pixels", b.Dx(), b.Dy())
			}
			text, err := testserver.DecodeQR(img)
			if err != nil {
				t.Fatalf("QR image does not decode: %v", err)
			}
			if text != c.ScanURL {
				t.Errorf("QR code encodes %q, want the scan URL %q", text, c.ScanURL)
			}
			if !strings.Contains(strings.ToLower(page), "simulate palm scan") {
				t.Errorf("dev-mode page has no \"Simulate palm scan\" button")
			}
			if strings.Contains(page, evil) {
				t.Errorf("the page echoes the deviceId unescaped: %s", evil)
			}
			for _, m := range attrRE.FindAllStringSubmatch(page, -1) {
				u := html.UnescapeString(m[1])
				if !strings.HasPrefix(u, "data:") && !strings.HasPrefix(u, "#") && !strings.HasPrefix(u, e.URL+"/") &&
					!(strings.HasPrefix(u, "/") && !strings.HasPrefix(u, "//")) && strings.Contains(u, ":") {
					t.Errorf("the page refers to an external resource %q", u)
				}
			}
		})
	}

	t.Run("unknown session", func(t *testing.T) {
		resp := e.do(t, "GET", "/v1/agent/register/0b6f3a52-2a8e-4a51-9d8c-6f4c1d2e3f40/verify", nil, "Accept", "text/html")
		if resp.Status != http.StatusNotFound {
			t.Errorf("HTML page of an unknown session: status %d, want 404", resp.Status)
		}
	})

	t.Run("dev-scan needs the nonce", func(t *testing.T) {
		for name, path := range map[string]string{
			"wrong nonce":       "/v1/palm/challenges/" + c.ChallengeID + "/dev-scan",
			"unknown challenge": "/v1/palm/challenges/0b6f3a52-2a8e-4a51-9d8c-6f4c1d2e3f40/dev-scan",
		} {
			nonce := "AAAAAAAAAAAAAAAAAAAAAAAA"
			if name == "unknown challenge" {
				nonce = c.Nonce
			}
			resp := e.do(t, "POST", path, map[string]any{"nonce": nonce, "palmSubject": e.subject("intruder")})
			if resp.Status != http.StatusNotFound {
				t.Errorf("dev-scan, %s: status %d, want 404\nbody: %s", name, resp.Status, resp.Body)
			}
		}
		if got := e.challengeStatus(t, c); got != "pending" {
			t.Errorf("challenge %q after refused scans, want pending", got)
		}
	})

	t.Run("after the scan", func(t *testing.T) {
		e.devScan(t, c, e.subject("page-owner")).ExpectStatus(t, http.StatusOK)
		if got := e.verifyInfo(t, s).Status; got != "verified" {
			t.Errorf("page JSON status %q after the scan, want verified", got)
		}
		if st := e.status(t, s.ID); str(st["status"]) != "completed" || str(st["deviceId"]) != a.deviceID {
			t.Errorf("status %v, want completed for %q", st, a.deviceID)
		}
	})
}
