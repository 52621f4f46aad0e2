package edge_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/core/oidc"
)

func withRegistration(cfg oidc.RegistrationConfig) func(*envOptions) {
	return func(o *envOptions) { cfg.Open = true; o.registration = cfg }
}

const regRedirect = "http://localhost:8090/callback"

// TestRegisterRoute: RFC 7591 at /oauth2/register answers 201 with the client,
// discovery names it, and the login page of the client says it registered itself.
func TestRegisterRoute(t *testing.T) {
	e := newEnv(t, withRegistration(oidc.RegistrationConfig{}))
	if d := decode(t, e.get(t, "/oauth2/.well-known/openid-configuration")); d["registration_endpoint"] != testIssuer+"/oauth2/register" {
		t.Fatalf("registration_endpoint = %v", d["registration_endpoint"])
	}
	w := e.postJSON(t, "/oauth2/register", map[string]any{"redirect_uris": []string{regRedirect}, "client_name": "My MCP Client",
		"token_endpoint_auth_method": "client_secret_post", "grant_types": []string{"authorization_code", "refresh_token"},
		"response_types": []string{"code"}, "logo_uri": "https://evil.example/logo.png", "scope": "mcp"})
	wantStatus(t, w, http.StatusCreated)
	if cc := w.Header().Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control = %q; an answer with a secret is no-store", cc)
	}
	m := decode(t, w)
	id, _ := m["client_id"].(string)
	if id == "" || m["client_secret"] == "" || m["client_secret_expires_at"] != float64(testStart.Add(oidc.DefaultRegistrationUnused).Unix()) || m["client_id_issued_at"] != float64(testStart.Unix()) ||
		m["client_name"] != "My MCP Client" || m["token_endpoint_auth_method"] != "client_secret_post" {
		t.Fatalf("registration answer = %v", m)
	}
	if uris, _ := m["redirect_uris"].([]any); len(uris) != 1 || uris[0] != regRedirect {
		t.Fatalf("redirect_uris = %v; want them echoed", m["redirect_uris"])
	}
	if _, ok := m["logo_uri"]; ok {
		t.Fatal("logo_uri echoed: it is ignored")
	}
	q := authorizeQuery()
	q.Set("client_id", id)
	q.Set("redirect_uri", regRedirect)
	l := e.authorize(t, q)
	page := e.do(t, req{method: http.MethodGet, target: "/oauth2/verify?auth_request_id=" + l.id, cookies: []*http.Cookie{l.cookie}})
	wantStatus(t, page, http.StatusOK)
	if body := html.UnescapeString(page.Body.String()); !strings.Contains(body, "My MCP Client") || !strings.Contains(body, oidc.RegisteredNotice) {
		t.Fatalf("the login page does not say the client registered itself:\n%s", body)
	}
}

// TestRegisterRefusals: RFC 7591's errors, the body rules, the caps and off.
func TestRegisterRefusals(t *testing.T) {
	e := newEnv(t, withRegistration(oidc.RegistrationConfig{MaxPerNetwork: 2}), withRateLimit(100))
	for _, tc := range []struct {
		name, body, ctype string
		status            int
		code              string
	}{
		{"http on a public host", `{"redirect_uris":["http://evil.example/cb"]}`, "application/json", 400, oidc.ErrInvalidRedirectURI},
		{"no redirect_uris", `{"client_name":"x"}`, "application/json", 400, oidc.ErrInvalidRedirectURI},
		{"a bidi name", `{"redirect_uris":["` + regRedirect + `"],"client_name":"Pay\u202egnp.exe"}`, "application/json", 400, oidc.ErrInvalidClientMetadata},
		{"a control character", `{"redirect_uris":["` + regRedirect + `"],"client_name":"a\u0000b"}`, "application/json", 400, oidc.ErrInvalidClientMetadata},
		{"an array", `[]`, "application/json", 400, oidc.ErrInvalidClientMetadata},
		{"two objects", `{} {}`, "application/json", 400, oidc.ErrInvalidClientMetadata},
		{"not JSON", `redirect_uris=x`, "application/x-www-form-urlencoded", 415, oidc.ErrInvalidRequest},
		{"too large", `{"client_name":"` + strings.Repeat("a", 70<<10) + `"}`, "application/json", 413, oidc.ErrInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := e.do(t, req{method: http.MethodPost, target: "/oauth2/register", body: tc.body, contentType: tc.ctype})
			wantOAuthError(t, w, tc.status, tc.code)
		})
	}
	body := map[string]any{"redirect_uris": []string{regRedirect}, "token_endpoint_auth_method": "none"}
	for range 2 {
		wantStatus(t, e.postJSON(t, "/oauth2/register", body), http.StatusCreated)
	}
	w := e.postJSON(t, "/oauth2/register", body)
	wantOAuthError(t, w, http.StatusTooManyRequests, oidc.TemporarilyUnavailable)
	wantRetryAfter(t, w)

	off := newEnv(t)
	wantStatus(t, off.postJSON(t, "/oauth2/register", body), http.StatusNotFound)
	wantStatus(t, off.get(t, "/oauth2/register"), http.StatusNotFound) // not 405: no trace of the route
	if d := decode(t, off.get(t, "/oauth2/.well-known/openid-configuration")); d["registration_endpoint"] != nil || d["client_id_metadata_document_supported"] != nil {
		t.Fatalf("discovery names registration or documents while off: %v", d)
	}
}

// TestRegisterRateLimited: the route counts against the per-address rate limit.
func TestRegisterRateLimited(t *testing.T) {
	e := newEnv(t, withRegistration(oidc.RegistrationConfig{}), withRateLimit(1))
	body := map[string]any{"redirect_uris": []string{regRedirect}}
	wantStatus(t, e.postJSON(t, "/oauth2/register", body), http.StatusCreated)
	w := e.postJSON(t, "/oauth2/register", body)
	wantStatus(t, w, http.StatusTooManyRequests)
	wantRetryAfter(t, w)
}

// fixedDoc serves one client ID metadata document.
type fixedDoc map[string]string

func (f fixedDoc) Fetch(_ context.Context, id string) ([]byte, error) { return []byte(f[id]), nil }

// TestMetadataDocumentLoginPage: the login page of a metadata document client
// names the document's host; discovery says documents are supported.
func TestMetadataDocumentLoginPage(t *testing.T) {
	const doc = "https://tools.example.test/client.json"
	e := newEnv(t, func(o *envOptions) {
		o.metadata = fixedDoc{doc: `{"client_id":"` + doc + `","client_name":"Tool","redirect_uris":["` + regRedirect + `"]}`}
	})
	if d := decode(t, e.get(t, "/oauth2/.well-known/openid-configuration")); d["client_id_metadata_document_supported"] != true {
		t.Fatalf("client_id_metadata_document_supported = %v", d["client_id_metadata_document_supported"])
	}
	q := authorizeQuery()
	q.Set("client_id", doc)
	q.Set("redirect_uri", regRedirect)
	l := e.authorize(t, q)
	page := e.do(t, req{method: http.MethodGet, target: "/oauth2/verify?auth_request_id=" + url.QueryEscape(l.id), cookies: []*http.Cookie{l.cookie}})
	if body := html.UnescapeString(page.Body.String()); !strings.Contains(body, oidc.MetadataNotice("tools.example.test")) {
		t.Fatalf("the login page does not name the document's host:\n%s", body)
	}
}
