package integration

import (
	"net/url"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/internal/tooltest"
)

// TestMCPTypeScriptSDKRootResourceAndScope (fourth review): the stock TypeScript
// SDK client, registering itself, connects to an MCP server whose
// palmgate_bearer names its origin as the resource (`resource http://host:port`,
// no path) and requires a scope. The SDK asks for the scope its 401 and the
// resource metadata name: before, palmgate refused it (invalid_scope: a
// self-registered client has only the default scopes), and no such client could
// reach the server. The token's aud is the resource and holds the scope, and the
// tool answers. (This SDK release sends the resource verbatim; older ones sent
// `new URL(resource).href`, `http://host:port/`, which core/oidc's
// TestResourceSpelledByTheSDK covers.)
func TestMCPTypeScriptSDKRootResourceAndScope(t *testing.T) {
	t.Parallel()
	node := tooltest.Node.Need(t)
	tooltest.Chromium.Need(t)
	npmCI(t, "rp/mcp")
	cb, codes := mcpCallback(t)
	e, mcpURL := mcpSiteBearer(t, nil, nil, "resource {base}\nscope tools:call", "registration open")
	ctx := startChromium(t)

	run := startMCPClient(t, node, mcpURL, cb.URL+"/callback", "register")
	clientID := run.next(t, "CLIENT")
	authorize, err := url.Parse(run.next(t, "AUTHORIZE"))
	if err != nil {
		t.Fatal(err)
	}
	if q := authorize.Query(); q.Get("resource") != e.URL || q.Get("scope") != "tools:call" {
		t.Errorf("authorization request %v: want resource %s and scope tools:call", q, e.URL)
	}
	token, result := run.signIn(t, ctx, authorize.String(), e.subject("mcp-root"), codes)
	claims := jwtPart(t, token, 1)
	expectAudience(t, token, e.URL)
	if !strings.Contains(" "+str(claims["scope"])+" ", " tools:call ") {
		t.Errorf("token scope %q lacks tools:call", claims["scope"])
	}
	if sub := str(claims["sub"]); sub == "" || result.Result.IsError || result.Result.StructuredContent["sub"] != sub || result.Result.StructuredContent["client_id"] != clientID {
		t.Errorf("whoami answered %+v; want the pairwise sub %q and client_id %s", result.Result, sub, clientID)
	}
}
