package minimalcaddy

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/palmgate/palmgate/bench/minimal"
)

// TestAnswersAsTheMinimalServer: the module answers verify/signature as the
// minimal server does (minimal.Check, the minimal server's own test), and
// passes every other request to the next handler.
func TestAnswersAsTheMinimalServer(t *testing.T) {
	var h Handler
	if err := h.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	passed := 0
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		passed++
		w.WriteHeader(http.StatusTeapot)
		return nil
	})
	serve := func(method, path string, body []byte) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(method, path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if err := h.ServeHTTP(rec, req, next); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return rec
	}
	err := minimal.Check(func(body []byte) (int, http.Header, []byte, error) {
		rec := serve("POST", minimal.VerifyPath, body)
		return rec.Code, rec.Header(), rec.Body.Bytes(), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if passed != 0 {
		t.Errorf("the signature check went on to the next handler %d times", passed)
	}
	for _, path := range []string{"/static", "/v1/agent/verify/device/x", minimal.VerifyPath + "/"} {
		if rec := serve("GET", path, nil); rec.Code != http.StatusTeapot {
			t.Errorf("GET %s: %d, want the next handler's answer", path, rec.Code)
		}
	}
}

// TestCaddyfile: the directive goes in a site block with no route around it,
// takes no argument, and its handler sits where palmgate's does, before the
// site's handle blocks.
func TestCaddyfile(t *testing.T) {
	adapt := func(site string) (string, error) {
		cf := "{\n\tadmin 127.0.0.1:2999\n\tpersist_config off\n}\n\nhttp://127.0.0.1:8999 {\n" + site + "\n}\n"
		out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), nil)
		return string(out), err
	}
	out, err := adapt("\thandle /static {\n\t\trespond \"ok\" 200\n\t}\n\tminimal_verify")
	if err != nil {
		t.Fatal(err)
	}
	i, j := strings.Index(out, `"handler":"minimal_verify"`), strings.Index(out, `"handler":"static_response"`)
	if i < 0 || j < 0 || i > j {
		t.Errorf("want minimal_verify before the handle block's respond:\n%s", out)
	}
	if _, err := adapt("\tminimal_verify extra"); err == nil {
		t.Error("an argument was accepted")
	}
}

// TestAnswersATokenRequest: a token request gets the three tokens, the ID
// token signed with ES256 for ES256Client and RS256 for any other client, with
// the headers RFC 6749 asks for; a request that is not an authorization code
// grant gets a 400.
func TestAnswersATokenRequest(t *testing.T) {
	var h Handler
	if err := h.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.WriteHeader(http.StatusTeapot)
		return nil
	})
	post := func(form url.Values) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", TokenPath, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if err := h.ServeHTTP(rec, req, next); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	for client, alg := range map[string]string{ES256Client: "ES256", "bench-rs": "RS256"} {
		rec := post(url.Values{"grant_type": {"authorization_code"}, "code": {"c"}, "client_id": {client}})
		var got tokenAnswer
		if err := json.Unmarshal(rec.Body.Bytes(), &got); rec.Code != http.StatusOK || err != nil {
			t.Fatalf("%s: %d %v %s", client, rec.Code, err, rec.Body)
		}
		if rec.Header().Get("Cache-Control") != "no-store" || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s: headers %v", client, rec.Header())
		}
		for name, tok := range map[string]string{"access": got.AccessToken, "id": got.IDToken, "refresh": got.RefreshToken} {
			want := "ES256"
			if name == "id" {
				want = alg
			}
			if h := tokenAlg(t, tok); h != want {
				t.Errorf("%s: %s token signed with %q, want %s", client, name, h, want)
			}
		}
	}
	for _, form := range []url.Values{{"grant_type": {"refresh_token"}, "code": {"c"}}, {"grant_type": {"authorization_code"}}} {
		if rec := post(form); rec.Code != http.StatusBadRequest {
			t.Errorf("%v: %d, want 400", form, rec.Code)
		}
	}
	if rec := httptest.NewRecorder(); h.ServeHTTP(rec, httptest.NewRequest("GET", TokenPath, nil), next) != nil || rec.Code != http.StatusTeapot {
		t.Errorf("GET %s: %d, want the next handler's answer", TokenPath, rec.Code)
	}
}

// tokenAlg is the alg of a compact JWS's header.
func tokenAlg(t *testing.T, tok string) string {
	t.Helper()
	head, _, _ := strings.Cut(tok, ".")
	b, err := base64.RawURLEncoding.DecodeString(head)
	var h struct{ Alg string }
	if err != nil || json.Unmarshal(b, &h) != nil {
		t.Fatalf("not a JWS: %q", tok)
	}
	return h.Alg
}
