package portal

import (
	"net/http"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/internal/brand"
)

// TestPortalBrand: the portal's page shows the operator's brand (name escaped,
// logo, colour), its CSP admits the logo's origin for images and nothing more;
// without a brand it is palmgate's own and admits no image source.
func TestPortalBrand(t *testing.T) {
	p, _ := newPortal(t, "http://127.0.0.1:8080")
	r := serve(p, "GET", "/portal", nil)
	if body, csp := r.Body.String(), r.Header().Get("Content-Security-Policy"); r.Code != http.StatusOK ||
		!strings.Contains(body, `<span>●</span> palmgate developer portal`) || strings.Contains(csp, "img-src") {
		t.Errorf("portal without a brand: %d, CSP %q\n%s", r.Code, csp, body)
	}
	p.brand = brand.Brand{Name: `Acme <i>ID</i>`, LogoURL: "https://cdn.acme.example/logo.svg", Color: "#0b5fff"}
	r = serve(p, "GET", "/portal", nil)
	body, csp := r.Body.String(), r.Header().Get("Content-Security-Policy")
	for _, want := range []string{
		`<img id="brand-logo" src="https://cdn.acme.example/logo.svg" alt=""> Acme &lt;i&gt;ID&lt;/i&gt; developer portal`,
		":root{--accent:#0b5fff}",
		"<title>",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("branded portal lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "<i>ID</i>") {
		t.Error("the brand name is not escaped")
	}
	if !strings.Contains(csp, "img-src https://cdn.acme.example;") || strings.Count(csp, "https:") != 1 {
		t.Errorf("branded portal CSP %q, want img-src https://cdn.acme.example alone", csp)
	}
}
