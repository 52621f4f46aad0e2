package portal

import (
	"net/http"
	"net/url"
	"regexp"
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

// TestPortalLocalTime: the previous secret's expiry after a rotation is a <time>
// with its ISO instant, which the page's script shows in the browser's time zone,
// and its UTC text for no script.
func TestPortalLocalTime(t *testing.T) {
	p, _ := newPortal(t, "http://127.0.0.1:8080")
	cookie := signedIn(p, "human-1")
	var s session
	p.open("session", cookie.Value, &s)
	csrf := p.csrfToken(&s)
	r := serve(p, "POST", "/portal/apps", url.Values{"csrf": {csrf}, "name": {"Timed App"}, "redirect_uris": {"https://timed.example/cb"}}, cookie)
	id := regexp.MustCompile(`id="client-id">([^<]+)<`).FindStringSubmatch(r.Body.String())
	if r.Code != http.StatusOK || id == nil {
		t.Fatalf("create: %d\n%s", r.Code, r.Body)
	}
	r = serve(p, "POST", "/portal/apps/"+id[1]+"/rotate", url.Values{"csrf": {csrf}, "grace": {"1h"}}, cookie)
	m := regexp.MustCompile(`<time class="local" id="previous-expires" datetime="(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(UTC\)</time>`).FindStringSubmatch(r.Body.String())
	if r.Code != http.StatusOK || m == nil {
		t.Fatalf("rotate: %d, want the previous secret's expiry as a <time>\n%s", r.Code, r.Body)
	}
	if !strings.Contains(r.Body.String(), `document.querySelectorAll("time.local")`) {
		t.Error("the portal's script does not rewrite the times")
	}
}
