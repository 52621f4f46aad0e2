package edge_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	corebearer "github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/edge"
)

// TestWellKnownMetadata: RFC 8414 metadata and the path-inserted OIDC discovery
// are the discovery document (issuer, endpoints, S256), with discovery's CORS;
// palmgate claims the three /.well-known families MCP clients try and answers
// JSON 404 for what it does not serve there, and leaves other /.well-known paths
// to the site (issue 23, item 1).
func TestWellKnownMetadata(t *testing.T) {
	e := newEnv(t)
	want := e.get(t, "/oauth2/.well-known/openid-configuration")
	wantStatus(t, want, http.StatusOK)
	for _, p := range []string{edge.PathASMetadata, edge.PathOIDCInserted} {
		if !edge.OwnsPath(p) {
			t.Errorf("OwnsPath(%s) = false", p)
		}
		w := e.get(t, p)
		wantStatus(t, w, http.StatusOK)
		if w.Body.String() != want.Body.String() {
			t.Errorf("%s differs from discovery:\n%s\nwant\n%s", p, w.Body, want.Body)
		}
		body := decode(t, w)
		if body["issuer"] != testIssuer+"/oauth2" || body["token_endpoint"] != testIssuer+"/oauth2/token" {
			t.Errorf("%s: issuer %v, token_endpoint %v", p, body["issuer"], body["token_endpoint"])
		}
		if m, _ := body["code_challenge_methods_supported"].([]any); len(m) != 1 || m[0] != "S256" {
			t.Errorf("%s: code_challenge_methods_supported %v", p, m)
		}
		pre := e.do(t, req{method: http.MethodOptions, target: p, header: http.Header{"Origin": {"https://evil.example"}, "Access-Control-Request-Method": {"GET"}}})
		if pre.Code != http.StatusNoContent {
			t.Errorf("%s: preflight %d, want 204", p, pre.Code)
		}
	}
	for _, p := range []string{
		"/.well-known/oauth-authorization-server", "/.well-known/oauth-authorization-server/other",
		"/.well-known/openid-configuration", "/.well-known/oauth-protected-resource",
		"/.well-known/oauth-protected-resource/mcp",
	} {
		if !edge.OwnsPath(p) {
			t.Errorf("OwnsPath(%s) = false: Caddy's empty 200 would answer it", p)
		}
		w := e.get(t, p)
		if w.Code != http.StatusNotFound || w.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %s, want a JSON 404", p, w.Code, w.Header().Get("Content-Type"))
		}
	}
	for _, p := range []string{"/.well-known/security.txt", "/.well-known/acme-challenge/x", "/.well-known/oauth-authorization-serverx"} {
		if edge.OwnsPath(p) {
			t.Errorf("OwnsPath(%s) = true: the site's own path", p)
		}
	}
}

// TestProtectedResourceMetadataServed: the palmgate handler serves the RFC 9728
// document of a resource a bearer block registered, on the resource's host only
// (issue 23, item 4).
func TestProtectedResourceMetadataServed(t *testing.T) {
	res := &corebearer.Resources{}
	md := corebearer.NewResourceMetadata("https://mcp.example.com/mcp", testIssuer+"/oauth2", []string{"orders"})
	res.Add(md)
	e := newEnv(t, func(o *envOptions) { o.resources = res })
	w := e.get(t, "https://mcp.example.com/.well-known/oauth-protected-resource/mcp")
	wantStatus(t, w, http.StatusOK)
	var got corebearer.ResourceMetadata
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatalf("decoding %s: %v", w.Body, err)
	}
	want := corebearer.ResourceMetadata{Resource: "https://mcp.example.com/mcp", AuthorizationServers: []string{testIssuer + "/oauth2"},
		ScopesSupported: []string{"orders"}, BearerMethodsSupported: []string{"header"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("document %+v, want %+v", got, want)
	}
	for _, target := range []string{
		"https://other.example.com/.well-known/oauth-protected-resource/mcp", // another host
		"https://mcp.example.com/.well-known/oauth-protected-resource/other",
		"https://mcp.example.com/.well-known/oauth-protected-resource",
	} {
		if w := e.get(t, target); w.Code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", target, w.Code)
		}
	}
}

// TestResourceShownToThePerson: a request for a resource (an MCP client's, with
// no openid) is accepted for a protected resource, and the login page and the
// person's app name the resource the scan opens (issue 23).
func TestResourceShownToThePerson(t *testing.T) {
	const mcp = "https://mcp.example.com/mcp"
	res := &corebearer.Resources{}
	res.Add(corebearer.NewResourceMetadata(mcp, testIssuer+"/oauth2", nil))
	e := newEnv(t, func(o *envOptions) { o.resources = res })
	q := authorizeQuery()
	q.Set("scope", "offline_access")
	q.Set("resource", mcp)
	q.Set("prompt", "consent")
	q.Del("nonce")
	l := e.authorize(t, q)
	want := "Access to " + mcp + " as you."
	page := e.do(t, req{method: http.MethodGet, target: "/oauth2/verify?auth_request_id=" + l.id, cookies: []*http.Cookie{l.cookie}})
	wantPage(t, page, http.StatusOK, want)
	id, nonce := e.challenge(t, l)
	app := e.get(t, "/v1/palm/challenges/"+id+"?nonce="+nonce)
	wantStatus(t, app, http.StatusOK)
	if !strings.Contains(app.Body.String(), want) {
		t.Errorf("the person's app is not told the resource: %s", app.Body)
	}
}
