package edge_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/core/oidc"
)

// TestMetadataClientFromTheBrowser (review 3, finding 4): a client ID metadata
// document's client is public, and a public client's pages may call the token
// endpoint from its redirect URIs' origins (CORS, as for a configured public
// client). Before, such a client had no origins at all: a browser app's code
// exchange was refused (400, "does not allow requests from the page's origin"), and
// an allowed answer would have had no CORS header for the page to read it.
func TestMetadataClientFromTheBrowser(t *testing.T) {
	const doc = "https://tools.example.test/client.json"
	const redirect = "https://tools.example.test/callback"
	const origin = "https://tools.example.test"
	e := newEnv(t, func(o *envOptions) {
		o.metadata = fixedDoc{doc: `{"client_id":"` + doc + `","client_name":"Tool","redirect_uris":["` + redirect + `"]}`}
	})
	q := spaQuery()
	q.Set("client_id", doc)
	q.Set("redirect_uri", redirect)
	w := e.scanned(t, q, "alice")
	wantStatus(t, w, http.StatusFound)
	loc, _ := url.Parse(w.Header().Get("Location"))
	code := loc.Query().Get("code")
	if !strings.HasPrefix(loc.String(), redirect+"?") || code == "" {
		t.Fatalf("Location = %q, want a code", loc)
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect},
		"code_verifier": {spaVerifier}, "client_id": {doc}}

	// From another origin: refused before any work, with no CORS header.
	w = e.postForm(t, "/oauth2/token", form, fromOrigin(evilOrigin))
	wantOAuthError(t, w, http.StatusBadRequest, oidc.ErrInvalidRequest)
	wantCORS(t, w, "")

	// From the page of its redirect URI: the tokens, readable by the page.
	w = e.postForm(t, "/oauth2/token", form, fromOrigin(origin))
	wantStatus(t, w, http.StatusOK)
	wantCORS(t, w, origin)
	rt, _ := decode(t, w)["refresh_token"].(string)
	if rt == "" {
		t.Fatalf("no refresh token: %s", w.Body)
	}
	w = e.postForm(t, "/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {doc}}, fromOrigin(origin))
	wantStatus(t, w, http.StatusOK)
	wantCORS(t, w, origin)

	// Introspection has no CORS, for any client.
	w = e.postForm(t, "/oauth2/introspect", url.Values{"token": {"x"}, "client_id": {doc}}, fromOrigin(origin))
	wantCORS(t, w, "")
}
