package integration

import (
	"crypto/tls"
	"encoding/pem"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/palmgate/palmgate/internal/testserver"
)

// Dynamic client registration (RFC 7591) and client ID metadata documents
// (issue 23, items 2 and 3) against the real binary.

// register posts client metadata to /oauth2/register.
func (e *env) registerClient(t *testing.T, metadata map[string]any) *testserver.Response {
	t.Helper()
	return e.do(t, "POST", "/oauth2/register", metadata)
}

// registeredClient registers metadata, expects 201 and returns the client.
func (e *env) registeredClient(t *testing.T, metadata map[string]any) oidcClient {
	t.Helper()
	m := e.registerClient(t, metadata).ExpectStatus(t, http.StatusCreated).Object(t)
	c := oidcClient{id: str(m["client_id"]), secret: str(m["client_secret"])}
	if c.secret != "" {
		testserver.Sensitive("client secret", c.secret)
	}
	for _, u := range m["redirect_uris"].([]any) {
		c.redirects = append(c.redirects, str(u))
	}
	c.public = c.secret == ""
	if c.id == "" || len(c.redirects) == 0 {
		t.Fatalf("registration answer %v: want client_id and redirect_uris", m)
	}
	return c
}

// TestDynamicRegistrationLogin: a public client registered with loopback URIs
// of any port and a confidential one (client_secret_post, as the TypeScript
// SDK's example) log in and exchange their codes; discovery names the endpoint;
// the login page says the client registered itself.
func TestDynamicRegistrationLogin(t *testing.T) {
	t.Parallel()
	e := startOIDC(t, nil, "registration open")
	d := e.do(t, "GET", "/oauth2/.well-known/openid-configuration", nil).ExpectStatus(t, http.StatusOK).Object(t)
	if str(d["registration_endpoint"]) != e.URL+"/oauth2/register" {
		t.Fatalf("registration_endpoint %v", d["registration_endpoint"])
	}

	public := e.registeredClient(t, map[string]any{"client_name": "MCP CLI", "token_endpoint_auth_method": "none",
		"redirect_uris": []string{"http://127.0.0.1:49213/callback", "http://[::1]:8123/cb", "https://tools.example/cb"},
		"grant_types":   []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"}})
	if !public.public {
		t.Fatal("a none registration got a secret")
	}
	id := e.authorize(t, e.authURL(public, "code_challenge", oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier()), "code_challenge_method", "S256"))
	page := e.do(t, "GET", e.verifyURL(id), nil).ExpectStatus(t, http.StatusOK)
	if body := html.UnescapeString(string(page.Body)); !strings.Contains(body, "MCP CLI") || !strings.Contains(body, "registered itself, not by the operator") {
		t.Fatalf("the login page does not mark the client as self-registered:\n%s", testserver.Snippet(page.Body))
	}
	code, verifier := e.codeFor(t, public, "alice", true)
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {public.redirects[0]},
		"client_id": {public.id}, "code_verifier": {verifier}}
	m := e.postToken(t, form).ExpectStatus(t, http.StatusOK).Object(t)
	e.userinfo(t, str(m["access_token"])).ExpectStatus(t, http.StatusOK)

	confidential := e.registeredClient(t, map[string]any{"client_name": "SDK example",
		"token_endpoint_auth_method": "client_secret_post", "redirect_uris": []string{"http://localhost:8090/callback"}})
	if confidential.public {
		t.Fatal("a client_secret_post registration got no secret")
	}
	code, verifier = e.codeFor(t, confidential, "alice", true)
	e.exchange(t, confidential, code, verifier)
}

// TestDynamicRegistrationRefusals: bad redirect URIs, bidi and control
// characters in names, too many registrations from one network, and
// registration off.
func TestDynamicRegistrationRefusals(t *testing.T) {
	t.Parallel()
	e := start(t, testserver.Options{Global: "rate_limit 1000 1m\nregistration open {\n per_network 2\n}"})
	for _, tc := range []struct {
		name     string
		metadata map[string]any
		code     string
	}{
		{"http on a public host", map[string]any{"redirect_uris": []string{"http://evil.example/cb"}}, "invalid_redirect_uri"},
		{"a custom scheme", map[string]any{"redirect_uris": []string{"javascript:alert(1)"}}, "invalid_redirect_uri"},
		{"a fragment", map[string]any{"redirect_uris": []string{"https://a.example/cb#x"}}, "invalid_redirect_uri"},
		{"no redirect URI", map[string]any{"client_name": "x"}, "invalid_redirect_uri"},
		{"a bidi name", map[string]any{"redirect_uris": []string{"http://localhost:1/cb"}, "client_name": "Bank \u202eelgooG"}, "invalid_client_metadata"},
		{"a control character", map[string]any{"redirect_uris": []string{"http://localhost:1/cb"}, "client_name": "Bank\u0007"}, "invalid_client_metadata"},
		{"private_key_jwt", map[string]any{"redirect_uris": []string{"http://localhost:1/cb"}, "token_endpoint_auth_method": "private_key_jwt"}, "invalid_client_metadata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectOAuthError(t, e.registerClient(t, tc.metadata), http.StatusBadRequest, tc.code)
		})
	}
	ok := map[string]any{"redirect_uris": []string{"http://localhost:1/cb"}, "token_endpoint_auth_method": "none"}
	e.registerClient(t, ok).ExpectStatus(t, http.StatusCreated)
	e.registerClient(t, ok).ExpectStatus(t, http.StatusCreated)
	r := e.registerClient(t, ok)
	expectOAuthError(t, r, http.StatusTooManyRequests, "temporarily_unavailable")
	if r.Header.Get("Retry-After") == "" {
		t.Error("the per-network refusal has no Retry-After")
	}

	off := startOIDC(t, nil)
	off.registerClient(t, ok).ExpectStatus(t, http.StatusNotFound)
	d := off.do(t, "GET", "/oauth2/.well-known/openid-configuration", nil).ExpectStatus(t, http.StatusOK).Object(t)
	if _, ok := d["registration_endpoint"]; ok {
		t.Errorf("discovery names registration_endpoint while registration is off")
	}
}

// docServer is an https server of client ID metadata documents, and the PEM file
// of its certificate, which palmgate trusts through SSL_CERT_FILE (as every Go
// program takes its roots from it).
func docServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, string) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = nil
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "doc-server.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return srv, file
}

// TestClientMetadataDocumentLogin: a client whose client_id is the https URL of
// its document logs in and exchanges its code; the login page names the
// document's host; refusals: a document naming another client_id, too large,
// too slow, redirected to another host, a client_id that is not https, and a
// private address without the operator's allowance.
func TestClientMetadataDocumentLogin(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	redirect := "http://127.0.0.1:43210/callback"
	var srv *httptest.Server
	srv, certFile := docServer(t, func(w http.ResponseWriter, r *http.Request) {
		doc := func(clientID string) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "max-age=60")
			_, _ = w.Write([]byte(`{"client_id":"` + clientID + `","client_name":"Doc Client","redirect_uris":["` + redirect + `"],"token_endpoint_auth_method":"none"}`))
		}
		switch r.URL.Path {
		case "/client.json":
			doc(srv.URL + "/client.json")
		case "/other.json":
			doc(srv.URL + "/client.json")
		case "/big.json":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"client_name":"` + strings.Repeat("x", 6<<10) + `"}`))
		case "/slow.json":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case "/moved.json":
			http.Redirect(w, r, "https://other.example/client.json", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	})
	t.Cleanup(func() { close(release) })
	e := start(t, testserver.Options{Global: "rate_limit off\nclient_metadata_documents on {\n allow_private\n}", Env: []string{"SSL_CERT_FILE=" + certFile}})
	d := e.do(t, "GET", "/oauth2/.well-known/openid-configuration", nil).ExpectStatus(t, http.StatusOK).Object(t)
	if d["client_id_metadata_document_supported"] != true {
		t.Fatalf("client_id_metadata_document_supported = %v", d["client_id_metadata_document_supported"])
	}
	c := oidcClient{id: srv.URL + "/client.json", redirects: []string{redirect}, public: true}
	id := e.authorize(t, e.authURL(c, "code_challenge", oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier()), "code_challenge_method", "S256"))
	page := e.do(t, "GET", e.verifyURL(id), nil).ExpectStatus(t, http.StatusOK)
	host := strings.TrimPrefix(srv.URL, "https://")
	if body := html.UnescapeString(string(page.Body)); !strings.Contains(body, "Doc Client") || !strings.Contains(body, "described by "+host) {
		t.Fatalf("the login page does not name the document's host %s:\n%s", host, testserver.Snippet(page.Body))
	}
	code, verifier := e.codeFor(t, c, "alice", true)
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect},
		"client_id": {c.id}, "code_verifier": {verifier}}
	e.postToken(t, form).ExpectStatus(t, http.StatusOK)

	for _, tc := range []struct{ path, why string }{
		{"/other.json", "names another client_id"},
		{"/big.json", "larger than 5120 bytes"},
		{"/slow.json", "longer than 5s"},
		{"/moved.json", "another host"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			bad := oidcClient{id: srv.URL + tc.path, redirects: []string{redirect}}
			m := expectOAuthError(t, e.do(t, "GET", e.authURL(bad), nil), http.StatusBadRequest, "invalid_request")
			if !strings.Contains(str(m["error_description"]), tc.why) {
				t.Errorf("error_description %q; want it to say %q", m["error_description"], tc.why)
			}
		})
	}
	plain := oidcClient{id: strings.Replace(srv.URL, "https:", "http:", 1) + "/client.json", redirects: []string{redirect}}
	expectOAuthError(t, e.do(t, "GET", e.authURL(plain), nil), http.StatusBadRequest, "invalid_request")

	strict := start(t, testserver.Options{Global: "rate_limit off\nclient_metadata_documents on", Env: []string{"SSL_CERT_FILE=" + certFile}})
	m := expectOAuthError(t, strict.do(t, "GET", strict.authURL(c), nil), http.StatusBadRequest, "invalid_request")
	if !strings.Contains(str(m["error_description"]), "non-public address") {
		t.Errorf("a document on a loopback address without allow_private: %q", m["error_description"])
	}
}
