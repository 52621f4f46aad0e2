package edge_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	corebearer "github.com/palmgate/palmgate/core/bearer"
)

// TestCheckAudience (review 3, finding 6): a gateway behind /oauth2/check can
// refuse a token meant for another resource (RFC 8707, RFC 9068 4) with
// ?audience=<its URI>, as palmgate_bearer { audience } does. Before, the check
// had no way to: a token the person granted to an MCP server (aud that server)
// passed every gateway of the issuer whose scopes it held.
func TestCheckAudience(t *testing.T) {
	const mcp = "https://mcp.example.com/mcp"
	res := &corebearer.Resources{}
	res.Add(corebearer.NewResourceMetadata(mcp, testIssuer+"/oauth2", nil))
	e := newEnv(t, func(o *envOptions) { o.resources = res })
	q := authorizeQuery()
	q.Set("resource", mcp)
	w := e.scanned(t, q, "alice")
	wantStatus(t, w, http.StatusFound)
	loc, _ := url.Parse(w.Header().Get("Location"))
	w = e.postForm(t, "/oauth2/token", codeForm(loc.Query().Get("code")), nil)
	wantStatus(t, w, http.StatusOK)
	forMCP, _ := decode(t, w)["access_token"].(string)
	plain, _ := e.tokens(t, "alice")["access_token"].(string) // aud: the base URL

	for _, tc := range []struct {
		name, query, token string
		want               int
	}{
		{"a token for the MCP server at another API", "audience=" + url.QueryEscape("https://api.example.com"), forMCP, http.StatusUnauthorized},
		{"a token for the MCP server at the MCP server", "audience=" + url.QueryEscape(mcp), forMCP, http.StatusOK},
		{"a token without resource at the base URL", "audience=" + url.QueryEscape(testIssuer), plain, http.StatusOK},
		{"a token without resource at the MCP server", "audience=" + url.QueryEscape(mcp), plain, http.StatusUnauthorized},
		{"the client's audience after path= is not the operator's", "path=/x&audience=" + url.QueryEscape("https://api.example.com"), forMCP, http.StatusOK},
		{"no audience: any", "", forMCP, http.StatusOK},
		{"two audiences", "audience=a&audience=b", plain, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := e.do(t, req{method: http.MethodGet, target: "/oauth2/check?" + tc.query, header: bearer(tc.token)})
			if w.Code != tc.want {
				t.Fatalf("GET /oauth2/check?%s: %d, want %d; %s %s", tc.query, w.Code, tc.want, w.Header(), w.Body)
			}
			if tc.want == http.StatusUnauthorized && !strings.Contains(w.Header().Get("WWW-Authenticate"), `error="invalid_token"`) {
				t.Errorf("WWW-Authenticate = %q, want invalid_token", w.Header().Get("WWW-Authenticate"))
			}
		})
	}
}
