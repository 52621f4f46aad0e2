package edge_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	corebearer "github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/oidc"
)

// preflightFrom sends the preflight a browser sends before a request with an
// Authorization header (and a JSON or form body) to path from origin.
func (e *testEnv) preflightFrom(t *testing.T, path, origin, method string) *recorder {
	t.Helper()
	return e.do(t, req{method: http.MethodOptions, target: path, header: http.Header{
		"Origin": {origin}, "Access-Control-Request-Method": {method}, "Access-Control-Request-Headers": {"authorization, content-type"}}})
}

// TestBrowserClientsOfAnyOrigin (fourth review): a browser app whose origins no
// configured client lists (a client ID metadata document's, or an MCP client in
// the browser before it registers) could not use palmgate across origins: the
// discovery documents, the JWKS and userinfo answered CORS only for the union of
// the indexed clients' origins, and the registration endpoint had no CORS at all
// (OPTIONS was 405). The public documents now answer any origin (they carry no
// credential; a server can read them anyway), the registration endpoint loopback
// origins (a local MCP client's page);
// userinfo answers any origin's preflight (it carries no token) and errors, but
// lets a page read the claims only from an origin the token's client allows, so
// a page of another client, even one in the union, reads nothing.
func TestBrowserClientsOfAnyOrigin(t *testing.T) {
	const doc = "https://tools.example.test/client.json"
	const redirect = "https://tools.example.test/callback"
	const origin = "https://tools.example.test"
	res := &corebearer.Resources{}
	res.Add(corebearer.NewResourceMetadata("https://mcp.example.com/mcp", testIssuer+"/oauth2", nil))
	e := newEnv(t, withSPA, withRegistration(oidc.RegistrationConfig{}), func(o *envOptions) {
		o.metadata = fixedDoc{doc: `{"client_id":"` + doc + `","client_name":"Tool","redirect_uris":["` + redirect + `"]}`}
		o.resources = res
	})

	// The public documents, from the document client's page (and any other).
	for _, path := range []string{"/oauth2/.well-known/openid-configuration", "/.well-known/oauth-authorization-server/oauth2",
		"/.well-known/openid-configuration/oauth2", "/oauth2/jwks", "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"} {
		for _, o := range []string{origin, evilOrigin} {
			w := e.do(t, req{method: http.MethodGet, target: path, header: fromOrigin(o)})
			wantStatus(t, w, http.StatusOK)
			wantCORS(t, w, o)
			w = e.preflightFrom(t, path, o, http.MethodGet)
			wantStatus(t, w, http.StatusNoContent)
			wantCORS(t, w, o)
		}
		wantCORS(t, e.do(t, req{method: http.MethodGet, target: path, header: fromOrigin("null")}), "")
	}

	// The document client's tokens, then userinfo from its page.
	q := spaQuery()
	q.Set("client_id", doc)
	q.Set("redirect_uri", redirect)
	w := e.scanned(t, q, "alice")
	loc, _ := url.Parse(w.Header().Get("Location"))
	form := url.Values{"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")}, "redirect_uri": {redirect},
		"code_verifier": {spaVerifier}, "client_id": {doc}}
	w = e.postForm(t, "/oauth2/token", form, fromOrigin(origin))
	wantStatus(t, w, http.StatusOK)
	access, _ := decode(t, w)["access_token"].(string)

	w = e.preflightFrom(t, "/oauth2/userinfo", origin, http.MethodGet)
	wantStatus(t, w, http.StatusNoContent)
	wantCORS(t, w, origin)
	if got := w.Header().Get("Access-Control-Allow-Headers"); !strings.Contains(got, "Authorization") {
		t.Errorf("userinfo preflight: Allow-Headers = %q", got)
	}
	userinfo := func(o, token string) *recorder {
		h := fromOrigin(o)
		if token != "" {
			h.Set("Authorization", "Bearer "+token)
		}
		return e.do(t, req{method: http.MethodGet, target: "/oauth2/userinfo", header: h})
	}
	w = userinfo(origin, access)
	wantStatus(t, w, http.StatusOK)
	wantCORS(t, w, origin)
	// Another client's page (an origin of the union) and a foreign page hold the
	// token: the answer is not theirs to read.
	for _, o := range []string{spaOrigin, evilOrigin} {
		w = userinfo(o, access)
		wantStatus(t, w, http.StatusOK)
		wantCORS(t, w, "")
	}
	// The SPA's own token from its own page still reads its claims.
	spaTokens := e.postForm(t, "/oauth2/token", spaCodeForm(e.spaCode(t)), fromOrigin(spaOrigin))
	spaAccess, _ := decode(t, spaTokens)["access_token"].(string)
	wantCORS(t, userinfo(spaOrigin, spaAccess), spaOrigin)
	wantCORS(t, userinfo(origin, spaAccess), "")
	// An error is readable by the page that sent the request, whatever its origin.
	w = userinfo(origin, "")
	wantStatus(t, w, http.StatusUnauthorized)
	wantCORS(t, w, origin)
	if !strings.Contains(w.Header().Get("Access-Control-Expose-Headers"), "WWW-Authenticate") {
		t.Error("a 401 does not expose WWW-Authenticate")
	}

	// Registration from a browser page before any client names its origin.
	const mcpOrigin = "http://localhost:6274"
	w = e.preflightFrom(t, "/oauth2/register", mcpOrigin, http.MethodPost)
	wantStatus(t, w, http.StatusNoContent)
	wantCORS(t, w, mcpOrigin)
	if got := w.Header().Get("Access-Control-Allow-Headers"); !strings.Contains(got, "Content-Type") {
		t.Errorf("register preflight: Allow-Headers = %q", got)
	}
	w = e.do(t, req{method: http.MethodPost, target: "/oauth2/register", contentType: "application/json", header: fromOrigin(mcpOrigin),
		body: `{"redirect_uris":["` + mcpOrigin + `/oauth/callback"],"token_endpoint_auth_method":"none"}`})
	wantStatus(t, w, http.StatusCreated)
	wantCORS(t, w, mcpOrigin)
	w = e.do(t, req{method: http.MethodPost, target: "/oauth2/register", contentType: "application/json", header: fromOrigin(mcpOrigin),
		body: `{"redirect_uris":["ftp://x"]}`})
	wantStatus(t, w, http.StatusBadRequest)
	wantCORS(t, w, mcpOrigin)
	// A page on the web is not answered: it could make each visitor's browser
	// register a client from the visitor's address. Nor an origin of the union:
	// a client that registered itself chose its redirect URIs' origins, such as
	// that page's.
	w = e.preflightFrom(t, "/oauth2/register", evilOrigin, http.MethodPost)
	wantStatus(t, w, http.StatusNoContent)
	wantCORS(t, w, "")
	w = e.do(t, req{method: http.MethodPost, target: "/oauth2/register", contentType: "application/json", header: fromOrigin(mcpOrigin),
		body: `{"redirect_uris":["https://evil.example.net/cb"],"token_endpoint_auth_method":"none"}`})
	wantStatus(t, w, http.StatusCreated)
	wantCORS(t, e.preflightFrom(t, "/oauth2/register", evilOrigin, http.MethodPost), "")
	wantCORS(t, e.preflightFrom(t, "/oauth2/register", spaOrigin, http.MethodPost), "")
	wantCORS(t, e.preflightFrom(t, "/oauth2/register", "http://127.0.0.1:8080", http.MethodPost), "http://127.0.0.1:8080")
}

// TestPreflightAllowsMCPProtocolVersion: the MCP TypeScript SDK in a browser
// sends MCP-Protocol-Version on its discovery requests (RFC 9728 and RFC 8414
// documents). A preflight that did not allow it failed, and the SDK only got on
// by retrying without the header, with a CORS error in the page's console.
func TestPreflightAllowsMCPProtocolVersion(t *testing.T) {
	res := &corebearer.Resources{}
	res.Add(corebearer.NewResourceMetadata("https://mcp.example.com/mcp", testIssuer+"/oauth2", nil))
	e := newEnv(t, func(o *envOptions) { o.resources = res })
	for _, path := range []string{"/.well-known/oauth-authorization-server/oauth2", "/oauth2/.well-known/openid-configuration",
		"https://mcp.example.com/.well-known/oauth-protected-resource/mcp"} {
		w := e.do(t, req{method: http.MethodOptions, target: path, header: http.Header{"Origin": {evilOrigin},
			"Access-Control-Request-Method": {"GET"}, "Access-Control-Request-Headers": {"mcp-protocol-version"}}})
		wantStatus(t, w, http.StatusNoContent)
		allowed := strings.Split(strings.ToLower(w.Header().Get("Access-Control-Allow-Headers")), ", ")
		if !slices.Contains(allowed, "mcp-protocol-version") {
			t.Errorf("%s: Access-Control-Allow-Headers = %q, want MCP-Protocol-Version among them", path, w.Header().Get("Access-Control-Allow-Headers"))
		}
	}
}
