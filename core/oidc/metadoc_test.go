package oidc

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/core/fault"
)

const docURL = "https://mcp.example.test/oauth/client.json"

// fakeDocs serves documents from a map (a missing URL fails) and counts fetches.
type fakeDocs struct {
	docs    map[string]string
	fetches int
}

func (f *fakeDocs) Fetch(_ context.Context, id string) ([]byte, error) {
	f.fetches++
	doc, ok := f.docs[id]
	if !ok {
		return nil, errors.New("it is larger than 5120 bytes")
	}
	return []byte(doc), nil
}

// TestMetadataDocumentClientLogs: a client whose client_id is the URL of its
// metadata document logs in with PKCE and no secret; the consent screen names
// the document's host; discovery says documents are supported.
func TestMetadataDocumentClientLogin(t *testing.T) {
	h := newHarness(t)
	if h.svc.Discovery().ClientIDMetadataDocumentSupported {
		t.Fatal("discovery claims metadata documents while they are off")
	}
	docs := &fakeDocs{docs: map[string]string{docURL: `{"client_id":"` + docURL + `","client_name":"Claude","redirect_uris":["` + regLoopback + `"],
		"grant_types":["authorization_code","refresh_token"],"response_types":["code"],"token_endpoint_auth_method":"none","logo_uri":"https://evil.example/x.png"}`}}
	h.svc.clients.metadata = docs
	if !h.svc.Discovery().ClientIDMetadataDocumentSupported {
		t.Fatal("discovery lacks client_id_metadata_document_supported")
	}
	ar := h.authorize(t, regParams(docURL, regLoopback))
	st, err := h.svc.Login(context.Background(), ar.ID, testBinding, false)
	if err != nil {
		t.Fatal(err)
	}
	if req := st.Challenge.Request; req.ClientName != "Claude" || !req.SelfRegistered || !strings.Contains(req.ClientNotice, "mcp.example.test") {
		t.Fatalf("palm request = %+v; want the name and a notice with the document's host", req)
	}
	l := h.login(t, regParams(docURL, regLoopback), "alice")
	resp, err := h.token("grant_type", "authorization_code", "client_id", docURL, "code", l.code,
		"redirect_uri", regLoopback, "code_verifier", spaVerifier)
	if err != nil || resp.AccessToken == "" {
		t.Fatalf("code exchange of a metadata document client = %+v, %v", resp, err)
	}
	// A redirect URI the document does not list is refused before any redirect.
	_, err = h.svc.Authorize(context.Background(), regParams(docURL, "http://localhost:9999/other"), testBrowser)
	if f := wantError(t, err, ErrInvalidRequest); !strings.Contains(f.Description, "not registered") {
		t.Fatalf("an unlisted redirect URI: %v", err)
	}
}

// TestMetadataDocumentRefusals: documents that describe no client palmgate
// serves, each refused with invalid_request saying why (never a redirect).
func TestMetadataDocumentRefusals(t *testing.T) {
	h := newHarness(t)
	doc := func(fields string) string {
		return `{"redirect_uris":["` + regLoopback + `"]` + fields + `}`
	}
	docs := &fakeDocs{docs: map[string]string{
		"https://a.example.test/other":  doc(`,"client_id":"https://a.example.test/c.json"`),
		"https://a.example.test/none":   doc(``),
		"https://a.example.test/post":   doc(`,"client_id":"https://a.example.test/post","token_endpoint_auth_method":"client_secret_post"`),
		"https://a.example.test/sec":    doc(`,"client_id":"https://a.example.test/sec","client_secret":"x"`),
		"https://a.example.test/bidi":   doc(`,"client_id":"https://a.example.test/bidi","client_name":"Good \u202eppA"`),
		"https://a.example.test/http":   `{"client_id":"https://a.example.test/http","redirect_uris":["http://evil.example/cb"]}`,
		"https://a.example.test/nouri":  `{"client_id":"https://a.example.test/nouri"}`,
		"https://a.example.test/grant":  doc(`,"client_id":"https://a.example.test/grant","grant_types":["client_credentials"]`),
		"https://a.example.test/nocode": doc(`,"client_id":"https://a.example.test/nocode","grant_types":["refresh_token"]`),
		"https://a.example.test/array":  `[]`,
	}}
	h.svc.clients.metadata = docs
	for id, why := range map[string]string{
		"https://a.example.test/other":                                          "names another client_id",
		"https://a.example.test/none":                                           "names another client_id",
		"https://a.example.test/post":                                           "public",
		"https://a.example.test/sec":                                            "public",
		"https://a.example.test/bidi":                                           "name",
		"https://a.example.test/http":                                           "https",
		"https://a.example.test/nouri":                                          "no redirect_uris",
		"https://a.example.test/grant":                                          "grant_types",
		"https://a.example.test/nocode":                                         "authorization_code",
		"https://a.example.test/array":                                          "not a JSON object",
		"https://a.example.test/missing":                                        "larger than",
		"https://a.example.test":                                                "must have a path",
		"https://a.example.test/a/../b":                                         "dot segments",
		"https://a.example.test/c.json#f":                                       "fragment",
		"https://u:p@a.example.test/c.json":                                     "user information",
		"https://a.example.test/" + strings.Repeat("x", MaxMetadataClientIDLen): "at most",
	} {
		_, err := h.svc.Authorize(context.Background(), regParams(id, regLoopback), testBrowser)
		f := wantError(t, err, ErrInvalidRequest)
		var back *RedirectError
		if errors.As(err, &back) || !strings.Contains(f.Description, why) {
			t.Errorf("client_id %.60s: %v; want invalid_request saying %q, not sent back", id, err, why)
		}
	}
	// Off: a URL is an unknown client_id, and nothing is fetched.
	h.svc.clients.metadata = nil
	docs.fetches = 0
	_, err := h.svc.Authorize(context.Background(), regParams("https://a.example.test/none", regLoopback), testBrowser)
	if f := wantError(t, err, ErrInvalidRequest); !strings.Contains(f.Description, "unknown client_id") {
		t.Fatalf("documents off: %v", err)
	}
	if docs.fetches != 0 {
		t.Fatal("a document was fetched while documents are off")
	}
	// A fetcher's temporary refusal stays one.
	h.svc.clients.metadata = busyDocs{}
	_, err = h.svc.Authorize(context.Background(), regParams(docURL, regLoopback), testBrowser)
	if f, ok := fault.As(err); !ok || f.Class != fault.Unavailable {
		t.Fatalf("a busy fetcher: %v; want Unavailable", err)
	}
}

type busyDocs struct{}

func (busyDocs) Fetch(context.Context, string) ([]byte, error) {
	return nil, &fault.Error{Class: fault.Unavailable, Code: TemporarilyUnavailable, Message: "busy"}
}
