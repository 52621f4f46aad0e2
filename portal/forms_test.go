package portal

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

var (
	clientIDRE = regexp.MustCompile(`id="client-id">([^<]+)<`)
	previousRE = regexp.MustCompile(`the previous one, until <time class="local" id="previous-expires" datetime="[^"]+">(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \(UTC\)</time>`)
)

// TestFailedFormsKeepWhatWasTyped: a creation, an edit or a rotation the registry
// refuses answers its 4xx with the form filled with what was typed and the
// reason beside it, not a bare error page.
func TestFailedFormsKeepWhatWasTyped(t *testing.T) {
	p, _ := newPortal(t, "https://id.example.test")
	cookie := signedIn(p, "human-1")
	csrf := csrfOf(t, p, cookie)

	typed := url.Values{"csrf": {csrf}, "name": {"My Typed App"}, "redirect_uris": {"https://typed.example/cb\nftp://bad.example/cb"},
		"post_logout_redirect_uris": {"https://typed.example/bye"}, "id_token_signed_response_alg": {"ES256"},
		"access_token_audience": {"client_id"}, "public": {"on"}, "allowed_origins": {"https://other.example"}}
	r := serve(p, "POST", "/portal/apps", typed, cookie)
	body := r.Body.String()
	if r.Code != http.StatusBadRequest || !strings.Contains(body, `id="form-error"`) || strings.Contains(body, `id="error"`) {
		t.Fatalf("a refused creation: %d, want 400 with the form and its error:\n%s", r.Code, body)
	}
	for _, want := range []string{`value="My Typed App"`, ">https://typed.example/cb\nftp://bad.example/cb</textarea>", ">https://typed.example/bye</textarea>",
		"<option selected>ES256</option>", "<option selected>client_id</option>", `value="on" checked>`, ">https://other.example</textarea>"} {
		if !strings.Contains(body, want) {
			t.Errorf("the refused creation's form lost %q:\n%s", want, body)
		}
	}

	// What is shown again is escaped: a typed value cannot inject markup.
	evil := url.Values{"csrf": {csrf}, "name": {`"><script>alert(1)</script>`}, "redirect_uris": {"</textarea><script>alert(2)</script>"}}
	r = serve(p, "POST", "/portal/apps", evil, cookie)
	if body := r.Body.String(); r.Code != http.StatusBadRequest || strings.Contains(body, "<script>alert") ||
		!strings.Contains(body, `value="&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"`) || !strings.Contains(body, "&lt;/textarea&gt;&lt;script&gt;alert(2)") {
		t.Errorf("a refused form with markup in it: %d, want 400 with the values escaped:\n%s", r.Code, body)
	}

	typed.Set("redirect_uris", "https://typed.example/cb")
	r = serve(p, "POST", "/portal/apps", typed, cookie)
	m := clientIDRE.FindStringSubmatch(r.Body.String())
	if r.Code != http.StatusOK || m == nil {
		t.Fatalf("creating: %d %s", r.Code, r.Body)
	}
	id := html.UnescapeString(m[1])

	edit := url.Values{"csrf": {csrf}, "name": {"Renamed"}, "redirect_uris": {"https://typed.example/cb\nhttps://x.example/#frag"}}
	r = serve(p, "POST", "/portal/apps/"+id, edit, cookie)
	body = r.Body.String()
	if r.Code != http.StatusBadRequest || !strings.Contains(body, `id="form-error"`) || !strings.Contains(body, `value="Renamed"`) ||
		!strings.Contains(body, ">https://typed.example/cb\nhttps://x.example/#frag</textarea>") || !strings.Contains(body, `id="snippet-go"`) {
		t.Errorf("a refused edit: %d, want 400 with the application's page and the typed values:\n%s", r.Code, body)
	}
}

// TestRotateGraceIsADuration: the rotate form takes a duration as the CLI does
// ("24h" by default, "90m", "1d", "0s"), and a bare number or a negative one is
// refused with the form as typed.
func TestRotateGraceIsADuration(t *testing.T) {
	p, c := newPortal(t, "https://id.example.test")
	cookie := signedIn(p, "human-1")
	csrf := csrfOf(t, p, cookie)
	r := serve(p, "POST", "/portal/apps", url.Values{"csrf": {csrf}, "name": {"Rotating"}, "redirect_uris": {"https://r.example/cb"}}, cookie)
	id := html.UnescapeString(clientIDRE.FindStringSubmatch(r.Body.String())[1])
	if !strings.Contains(r.Body.String(), `id="grace" name="grace" value="24h"`) {
		t.Errorf("the rotate form's default grace is not 24h:\n%s", r.Body)
	}
	for _, tc := range []struct {
		grace string
		want  time.Duration // -1: refused
	}{
		{"90m", 90 * time.Minute},
		{"1d", 24 * time.Hour},
		{"1d12h", 36 * time.Hour},
		{"", 24 * time.Hour},
		{"86400", -1},
		{"-1h", -1},
		{"soon", -1},
		{"0s", 0},
	} {
		r := serve(p, "POST", "/portal/apps/"+id+"/rotate", url.Values{"csrf": {csrf}, "grace": {tc.grace}}, cookie)
		body := r.Body.String()
		if tc.want < 0 {
			if r.Code != http.StatusBadRequest || !strings.Contains(body, `id="form-error"`) || !strings.Contains(body, `value="`+html.EscapeString(tc.grace)+`"`) {
				t.Errorf("grace %q: %d, want 400 with the rotate form as typed:\n%s", tc.grace, r.Code, body)
			}
			continue
		}
		m := previousRE.FindStringSubmatch(body)
		switch {
		case r.Code != http.StatusOK:
			t.Errorf("grace %q: %d %s", tc.grace, r.Code, body)
		case tc.want == 0 && m != nil:
			t.Errorf("grace 0s: the previous secret still works until %s", m[1])
		case tc.want > 0 && m == nil:
			t.Errorf("grace %q: the page shows no previous secret", tc.grace)
		case tc.want > 0:
			until, _ := time.Parse(time.DateTime, m[1])
			if d := until.Sub(c.Now().UTC()); d < tc.want-2*time.Second || d > tc.want+time.Second {
				t.Errorf("grace %q: the previous secret works %v more, want %v", tc.grace, d, tc.want)
			}
		}
	}
}

// TestSameNamesToldApart: two applications of one name are told apart in the
// list by their creation date and redirect URI.
func TestSameNamesToldApart(t *testing.T) {
	p, _ := newPortal(t, "https://id.example.test")
	cookie := signedIn(p, "human-1")
	csrf := csrfOf(t, p, cookie)
	for _, uri := range []string{"https://one.example/cb", "https://two.example/cb\nhttps://two.example/cb2"} {
		if r := serve(p, "POST", "/portal/apps", url.Values{"csrf": {csrf}, "name": {"Twin"}, "redirect_uris": {uri}}, cookie); r.Code != http.StatusOK {
			t.Fatalf("creating Twin: %d %s", r.Code, r.Body)
		}
	}
	body := serve(p, "GET", "/portal", nil, cookie).Body.String()
	for _, want := range []string{"https://one.example/cb</div>", "https://two.example/cb and 1 more</div>", "created " + time.Now().UTC().Format("2006-01-02")} {
		if !strings.Contains(body, want) {
			t.Errorf("the list lacks %q:\n%s", want, body)
		}
	}
}
