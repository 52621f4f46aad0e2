package portal

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// TestAppLogoutAndAlgFields (issue 18, finding 3; issue 21, item 2): the portal's
// forms set an application's post-logout redirect URIs, ID token algorithm and
// access token audience, its page shows them, and bad values are a 400 page that
// says what is wrong.
func TestAppLogoutAndAlgFields(t *testing.T) {
	p, _ := newPortal(t, "http://127.0.0.1:8080")
	cookie := signedIn(p, "human-1")
	var s session
	p.open("session", cookie.Value, &s)
	csrf := p.csrfToken(&s)
	form := url.Values{"csrf": {csrf}, "name": {"Shop"}, "redirect_uris": {"https://shop.example/cb"},
		"post_logout_redirect_uris": {"https://shop.example/bye\r\n\r\nhttps://shop.example/bye2"}, "id_token_signed_response_alg": {"ES256"},
		"access_token_audience": {"client_id"}}
	r := serve(p, "POST", "/portal/apps", form, cookie)
	body := r.Body.String()
	if r.Code != http.StatusOK || !strings.Contains(body, `id="post-logout-redirect-uris">https://shop.example/bye https://shop.example/bye2<`) ||
		!strings.Contains(body, `id="id-token-alg">ES256<`) || !strings.Contains(body, `<option selected>ES256</option>`) ||
		!strings.Contains(body, `id="access-token-audience">client_id<`) || !strings.Contains(body, `<option selected>client_id</option>`) {
		t.Fatalf("create with both fields: %d\n%s", r.Code, body)
	}
	id := regexp.MustCompile(`id="client-id">([^<]+)<`).FindStringSubmatch(body)[1]

	form = url.Values{"csrf": {csrf}, "name": {"Shop"}, "redirect_uris": {"https://shop.example/cb"},
		"post_logout_redirect_uris": {""}, "id_token_signed_response_alg": {"EdDSA"}, "access_token_audience": {"both"}}
	r = serve(p, "POST", "/portal/apps/"+id, form, cookie)
	if body := r.Body.String(); r.Code != http.StatusOK || !strings.Contains(body, `id="post-logout-redirect-uris"><`) || !strings.Contains(body, `id="id-token-alg">EdDSA<`) ||
		!strings.Contains(body, `id="access-token-audience">both<`) {
		t.Errorf("update clearing the URIs and choosing EdDSA: %d\n%s", r.Code, body)
	}

	for _, tc := range []struct{ name, field, value, want string }{
		{"unknown alg", "id_token_signed_response_alg", "HS256", "id_token_signed_response_alg"},
		{"alg none", "id_token_signed_response_alg", "none", "id_token_signed_response_alg"},
		{"unknown audience", "access_token_audience", "issuer", "access_token_audience"},
		{"http post-logout URI", "post_logout_redirect_uris", "http://shop.example/bye", "post_logout_redirect_uri"},
		{"post-logout URI with a fragment", "post_logout_redirect_uris", "https://shop.example/bye#x", "post_logout_redirect_uri"},
		{"reserved name", "name", "Acme Admin", "reserved"},
		{"bidi name", "name", "x\u202egnp.exe", "bidi"},
	} {
		for _, path := range []string{"/portal/apps", "/portal/apps/" + id} {
			form := url.Values{"csrf": {csrf}, "name": {"Shop"}, "redirect_uris": {"https://shop.example/cb"}}
			form.Set(tc.field, tc.value)
			r := serve(p, "POST", path, form, cookie)
			if r.Code != http.StatusBadRequest || !strings.Contains(r.Body.String(), tc.want) {
				t.Errorf("%s at %s: %d, want 400 naming %q\n%s", tc.name, path, r.Code, tc.want, r.Body)
			}
		}
	}
}

// TestAppBackchannelLogoutURI: the portal's forms set and clear an
// application's back-channel logout URI and its page shows it; a developer's
// must be https (not http, even on localhost: palmgate's own) without a fragment.
func TestAppBackchannelLogoutURI(t *testing.T) {
	p, _ := newPortal(t, "http://127.0.0.1:8080")
	cookie := signedIn(p, "human-1")
	var s session
	p.open("session", cookie.Value, &s)
	csrf := p.csrfToken(&s)
	bcl := "https://shop.example/redirect_uri?logout=backchannel"
	form := url.Values{"csrf": {csrf}, "name": {"Shop"}, "redirect_uris": {"https://shop.example/cb"}, "backchannel_logout_uri": {" " + bcl + " "}}
	r := serve(p, "POST", "/portal/apps", form, cookie)
	body := r.Body.String()
	want := `id="backchannel-logout-uri">` + strings.ReplaceAll(bcl, "&", "&amp;") + `<`
	if r.Code != http.StatusOK || !strings.Contains(body, want) {
		t.Fatalf("create with a back-channel logout URI: %d, want %s\n%s", r.Code, want, body)
	}
	id := regexp.MustCompile(`id="client-id">([^<]+)<`).FindStringSubmatch(body)[1]
	form = url.Values{"csrf": {csrf}, "name": {"Shop"}, "redirect_uris": {"https://shop.example/cb"}, "backchannel_logout_uri": {""}}
	if r := serve(p, "POST", "/portal/apps/"+id, form, cookie); r.Code != http.StatusOK || !strings.Contains(r.Body.String(), `id="backchannel-logout-uri"><`) {
		t.Errorf("update clearing it: %d\n%s", r.Code, r.Body)
	}
	for _, v := range []string{"http://shop.example/bcl", "https://shop.example/bcl#x", "/bcl", "http://localhost:2019/stop"} {
		for _, path := range []string{"/portal/apps", "/portal/apps/" + id} {
			form := url.Values{"csrf": {csrf}, "name": {"Shop"}, "redirect_uris": {"https://shop.example/cb"}, "backchannel_logout_uri": {v}}
			if r := serve(p, "POST", path, form, cookie); r.Code != http.StatusBadRequest || !strings.Contains(r.Body.String(), "backchannel_logout_uri") {
				t.Errorf("%s at %s: %d, want 400 naming backchannel_logout_uri\n%s", v, path, r.Code, r.Body)
			}
		}
	}
}
