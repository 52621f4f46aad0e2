package caddymodule

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/edge"
)

const testOIDCIssuer = "https://id.example.test/oauth2"

// newMetadataBearer is a provisioned palmgate_bearer without a store: enough for
// refusals (no token) and the metadata document.
func newMetadataBearer(t *testing.T, b *Bearer) *Bearer {
	t.Helper()
	b.Realm, b.logger = edge.Realm, zap.NewNop()
	b.verifier = bearer.NewVerifier(bearer.Config{Issuer: testOIDCIssuer, Algorithm: "ES256", Keys: bearer.NewRemoteKeys(testOIDCIssuer, http.DefaultClient, 0, nil)})
	if err := b.provisionResource(testOIDCIssuer); err != nil {
		t.Fatalf("provisionResource: %v", err)
	}
	return b
}

func serveBearer(b *Bearer, target string) (*httptest.ResponseRecorder, error) {
	w := httptest.NewRecorder()
	err := b.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil), caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error {
		return errors.New("next handler reached")
	}))
	return w, err
}

// TestBearerResourceMetadata: a 401 of palmgate_bearer names the RFC 9728
// document (and the scopes it requires), and the block serves that document at
// the URL it names: the configured resource's, else the request origin's
// (issue 23, item 4).
func TestBearerResourceMetadata(t *testing.T) {
	for _, tc := range []struct {
		name, resource, target, mdURL, mdTarget, wantResource string
	}{
		{"configured resource", "https://mcp.example.test/mcp", "https://mcp.example.test/mcp",
			"https://mcp.example.test/.well-known/oauth-protected-resource/mcp", "https://mcp.example.test/.well-known/oauth-protected-resource/mcp", "https://mcp.example.test/mcp"},
		{"the request's origin", "", "http://site.example.test/api/x",
			"http://site.example.test/.well-known/oauth-protected-resource", "http://site.example.test/.well-known/oauth-protected-resource", "http://site.example.test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newMetadataBearer(t, &Bearer{Resource: tc.resource, Scopes: []string{"mcp:tools"}})
			w, err := serveBearer(b, tc.target)
			var he caddyhttp.HandlerError
			if !errors.As(err, &he) || he.StatusCode != http.StatusUnauthorized {
				t.Fatalf("no token: %v, want a 401", err)
			}
			challenge := w.Header().Get("WWW-Authenticate")
			for _, part := range []string{`Bearer realm="palmgate"`, `resource_metadata="` + tc.mdURL + `"`, `scope="mcp:tools"`} {
				if !strings.Contains(challenge, part) {
					t.Errorf("challenge %q lacks %s", challenge, part)
				}
			}
			w, err = serveBearer(b, tc.mdTarget)
			if err != nil || w.Code != http.StatusOK {
				t.Fatalf("metadata: %d, %v", w.Code, err)
			}
			var md bearer.ResourceMetadata
			if err := json.Unmarshal(w.Body.Bytes(), &md); err != nil {
				t.Fatal(err)
			}
			if md.Resource != tc.wantResource || len(md.AuthorizationServers) != 1 || md.AuthorizationServers[0] != testOIDCIssuer ||
				len(md.ScopesSupported) != 1 || md.ScopesSupported[0] != "mcp:tools" || len(md.BearerMethodsSupported) != 1 || md.BearerMethodsSupported[0] != "header" {
				t.Errorf("document %+v", md)
			}
		})
	}
	t.Run("another well-known path is the upstream's business", func(t *testing.T) {
		b := newMetadataBearer(t, &Bearer{Resource: "https://mcp.example.test/mcp"})
		_, err := serveBearer(b, "https://mcp.example.test/.well-known/oauth-protected-resource/other")
		if he := (caddyhttp.HandlerError{}); !errors.As(err, &he) || he.StatusCode != http.StatusUnauthorized {
			t.Errorf("another path: %v, want the 401 of a request without a token", err)
		}
	})
}

// TestBearerResourceIsTheAudience: `resource` is the audience tokens must carry;
// an audience that differs, or a resource that is no http(s) URL, is refused.
func TestBearerResourceIsTheAudience(t *testing.T) {
	b := newMetadataBearer(t, &Bearer{Resource: "https://mcp.example.test/mcp"})
	if b.Audience != "https://mcp.example.test/mcp" {
		t.Errorf("Audience = %q, want the resource", b.Audience)
	}
	for _, bad := range []*Bearer{
		{Resource: "https://mcp.example.test/mcp", Audience: "https://other.example.test"},
		{Resource: "urn:example:mcp"},
		{Resource: "https://mcp.example.test/mcp?x=1"},
	} {
		if err := bad.provisionResource(testOIDCIssuer); err == nil || !strings.Contains(err.Error(), "resource") {
			t.Errorf("%+v: %v, want an error naming resource", bad, err)
		}
	}
}

// TestResourceOptionsCaddyfile: palmgate_bearer's `resource` and the global
// `resources` parse, and bad URIs are refused naming the option.
func TestResourceOptionsCaddyfile(t *testing.T) {
	var b Bearer
	if err := b.UnmarshalCaddyfile(caddyfile.NewTestDispenser("palmgate_bearer {\n\tresource https://mcp.example.test/mcp\n}")); err != nil || b.Resource != "https://mcp.example.test/mcp" {
		t.Errorf("resource: %q, %v", b.Resource, err)
	}
	for _, bad := range []string{"resource", "resource urn:x:y", "resource https://a.example/#f", "resource https://a.example https://b.example"} {
		var b Bearer
		if err := b.UnmarshalCaddyfile(caddyfile.NewTestDispenser("palmgate_bearer {\n\t" + bad + "\n}")); err == nil || !strings.Contains(err.Error(), "resource") {
			t.Errorf("%q: %v, want an error naming resource", bad, err)
		}
	}
	var a App
	if err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser("palmgate {\n\tresources https://a.example/mcp urn:example:api\n}")); err != nil || len(a.Resources) != 2 {
		t.Errorf("resources: %v, %v", a.Resources, err)
	}
	if err := validateResources([]string{"https://a.example/#f"}); err == nil || !strings.Contains(err.Error(), "resources") {
		t.Errorf("a resource with a fragment: %v", err)
	}
	var none App
	if err := none.UnmarshalCaddyfile(caddyfile.NewTestDispenser("palmgate {\n\tresources\n}")); err == nil || !strings.Contains(err.Error(), "resources") {
		t.Errorf("resources without a URI: %v", err)
	}
}
