package edge_test

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/core/oidc"
)

// The public client of these tests, and its origins.
const (
	spaID       = "spa"
	spaRedirect = "https://spa.example.com/callback"
	spaOrigin   = "https://spa.example.com"
	extraOrigin = "http://localhost:5173" // its allowed_origins
	evilOrigin  = "https://evil.example.net"
	spaVerifier = "spa-code-verifier-of-at-least-43-characters-0123456789"
)

func withSPA(o *envOptions) {
	o.clients = append(o.clients, oidc.Client{ID: spaID, Public: true, Name: "SPA",
		RedirectURIs: []string{spaRedirect}, AllowedOrigins: []string{extraOrigin}})
}

func spaQuery() url.Values {
	sum := sha256.Sum256([]byte(spaVerifier))
	return url.Values{
		"response_type": {"code"}, "client_id": {spaID}, "redirect_uri": {spaRedirect},
		"scope": {"openid offline_access"}, "state": {"s1"}, "nonce": {"n1"},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
	}
}

// spaCode logs alice in through the public client and returns its code.
func (e *testEnv) spaCode(t *testing.T) string {
	t.Helper()
	l := e.authorize(t, spaQuery())
	id, nonce := e.challenge(t, l)
	e.devScan(t, id, nonce, "alice")
	w := e.do(t, req{method: http.MethodGet, target: "/oauth2/verify?auth_request_id=" + l.id, cookies: []*http.Cookie{l.cookie}})
	wantStatus(t, w, http.StatusFound)
	loc, _ := url.Parse(w.Header().Get("Location"))
	if !strings.HasPrefix(loc.String(), spaRedirect+"?") || loc.Query().Get("code") == "" {
		t.Fatalf("Location = %q, want a code at the SPA's redirect_uri", loc)
	}
	return loc.Query().Get("code")
}

func spaCodeForm(code string) url.Values {
	return url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {spaRedirect},
		"code_verifier": {spaVerifier}, "client_id": {spaID}}
}

func fromOrigin(origin string) http.Header { return http.Header{"Origin": {origin}} }

// wantCORS checks the CORS headers of an answer: the echoed origin (never *), or
// none at all when origin is "".
func wantCORS(t *testing.T, w *recorder, origin string) {
	t.Helper()
	got := w.Header().Get("Access-Control-Allow-Origin")
	if got != origin {
		t.Errorf("Access-Control-Allow-Origin = %q, want %q (status %d)", got, origin, w.Code)
	}
	if origin == "" {
		for k := range w.Header() {
			if strings.HasPrefix(k, "Access-Control-") {
				t.Errorf("a refused origin got %s", k)
			}
		}
	}
	if w.Header().Get("Access-Control-Allow-Credentials") != "" {
		t.Error("Access-Control-Allow-Credentials is set")
	}
}

// TestPublicClientTokens: the public client exchanges its code with PKCE and no
// secret, refreshes with rotation, and a reused refresh token revokes the family;
// a secret sent by it is refused; without PKCE its authorization goes back
// invalid_request.
func TestPublicClientTokens(t *testing.T) {
	e := newEnv(t, withSPA)
	w := e.postForm(t, "/oauth2/token", spaCodeForm(e.spaCode(t)), nil)
	wantStatus(t, w, http.StatusOK)
	first := decode(t, w)
	rt, _ := first["refresh_token"].(string)
	if rt == "" || first["id_token"] == nil {
		t.Fatalf("token answer lacks a refresh or ID token: %s", w.Body)
	}
	refresh := func(token string) *recorder {
		return e.postForm(t, "/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {spaID}, "refresh_token": {token}}, nil)
	}
	w = refresh(rt)
	wantStatus(t, w, http.StatusOK)
	rt2, _ := decode(t, w)["refresh_token"].(string)
	wantOAuthError(t, refresh(rt), http.StatusBadRequest, "invalid_grant")  // reuse
	wantOAuthError(t, refresh(rt2), http.StatusBadRequest, "invalid_grant") // the family is revoked

	form := spaCodeForm(e.spaCode(t))
	form.Set("client_secret", "guessed")
	wantOAuthError(t, e.postForm(t, "/oauth2/token", form, nil), http.StatusUnauthorized, "invalid_client")

	q := spaQuery()
	q.Del("code_challenge")
	q.Del("code_challenge_method")
	w = e.get(t, "/oauth2/authorize?"+q.Encode())
	wantStatus(t, w, http.StatusFound)
	loc, _ := url.Parse(w.Header().Get("Location"))
	if !strings.HasPrefix(loc.String(), spaRedirect+"?") || loc.Query().Get("error") != "invalid_request" {
		t.Errorf("authorize without PKCE: Location = %q, want invalid_request at the redirect_uri", loc)
	}

	d := decode(t, e.get(t, "/oauth2/.well-known/openid-configuration"))
	if !strings.Contains(strings.Join(toStrings(d["token_endpoint_auth_methods_supported"]), " "), "none") {
		t.Errorf("discovery's token_endpoint_auth_methods_supported = %v, want none listed", d["token_endpoint_auth_methods_supported"])
	}
}

func toStrings(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// TestCORSPerEndpoint: each CORS endpoint echoes an allowed origin (with Vary:
// Origin) on its answers, errors included, and gives a refused origin no CORS
// header at all; the public documents and userinfo's errors answer any origin
// (fourth review, TestBrowserClientsOfAnyOrigin).
func TestCORSPerEndpoint(t *testing.T) {
	e := newEnv(t, withSPA)
	tokens := e.postForm(t, "/oauth2/token", spaCodeForm(e.spaCode(t)), nil)
	wantStatus(t, tokens, http.StatusOK)
	access, _ := decode(t, tokens)["access_token"].(string)
	cases := []struct {
		name   string
		rq     func(origin string) req
		status int
	}{
		{"discovery", func(o string) req {
			return req{method: http.MethodGet, target: "/oauth2/.well-known/openid-configuration", header: fromOrigin(o)}
		}, 200},
		{"jwks", func(o string) req { return req{method: http.MethodGet, target: "/oauth2/jwks", header: fromOrigin(o)} }, 200},
		{"userinfo", func(o string) req {
			return req{method: http.MethodGet, target: "/oauth2/userinfo", header: http.Header{"Origin": {o}, "Authorization": {"Bearer " + access}}}
		}, 200},
		{"userinfo without a token (401)", func(o string) req {
			return req{method: http.MethodGet, target: "/oauth2/userinfo", header: fromOrigin(o)}
		}, 401},
		{"token error (400)", func(o string) req {
			return req{method: http.MethodPost, target: "/oauth2/token", contentType: "application/x-www-form-urlencoded", header: fromOrigin(o),
				body: url.Values{"grant_type": {"refresh_token"}, "client_id": {spaID}, "refresh_token": {"not-a-token"}}.Encode()}
		}, 400},
		{"token without client_id (401)", func(o string) req {
			return req{method: http.MethodPost, target: "/oauth2/token", contentType: "application/x-www-form-urlencoded", header: fromOrigin(o),
				body: "grant_type=refresh_token&refresh_token=x"}
		}, 401},
		{"revoke", func(o string) req {
			return req{method: http.MethodPost, target: "/oauth2/revoke", contentType: "application/x-www-form-urlencoded", header: fromOrigin(o),
				body: url.Values{"client_id": {spaID}, "token": {"unknown"}}.Encode()}
		}, 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, origin := range []string{spaOrigin, extraOrigin} {
				w := e.do(t, c.rq(origin))
				wantStatus(t, w, c.status)
				wantCORS(t, w, origin)
				if !strings.Contains(strings.Join(w.Header().Values("Vary"), ","), "Origin") {
					t.Errorf("Vary = %q, want Origin", w.Header().Values("Vary"))
				}
				if c.status == 401 && !strings.Contains(w.Header().Get("Access-Control-Expose-Headers"), "WWW-Authenticate") {
					t.Error("a 401 does not expose WWW-Authenticate")
				}
			}
			w := e.do(t, c.rq(evilOrigin))
			if w.Code != c.status && !strings.HasPrefix(c.name, "token") && c.name != "revoke" {
				t.Errorf("a refused origin changed the status to %d", w.Code)
			}
			// (Fourth review) The public documents and userinfo's errors answer any
			// origin; userinfo's claims, the token and revocation endpoints do not.
			if open := c.name == "discovery" || c.name == "jwks" || c.status == 401 && c.name != "token without client_id (401)"; open {
				wantCORS(t, w, evilOrigin)
			} else {
				wantCORS(t, w, "")
			}
			w = e.do(t, c.rq("null"))
			wantCORS(t, w, "")
		})
	}
	// Introspection is no CORS endpoint.
	w := e.do(t, req{method: http.MethodPost, target: "/oauth2/introspect", contentType: "application/x-www-form-urlencoded",
		header: fromOrigin(spaOrigin), body: url.Values{"client_id": {testClientID}, "client_secret": {testSecret}, "token": {access}}.Encode()})
	wantCORS(t, w, "")
}

// TestCORSPreflight: OPTIONS answers 204 with the methods and headers for an
// allowed origin (userinfo's allows Authorization, whatever client the page is
// of), and no CORS header for another at the token and revocation endpoints;
// the public documents' and userinfo's answer any origin (fourth review).
func TestCORSPreflight(t *testing.T) {
	e := newEnv(t, withSPA)
	for path, methods := range map[string]string{
		"/oauth2/.well-known/openid-configuration": "GET, OPTIONS",
		"/oauth2/jwks":     "GET, OPTIONS",
		"/oauth2/token":    "OPTIONS, POST",
		"/oauth2/userinfo": "GET, OPTIONS, POST",
		"/oauth2/revoke":   "OPTIONS, POST",
	} {
		preflight := func(origin string) *recorder {
			return e.do(t, req{method: http.MethodOptions, target: path, header: http.Header{
				"Origin": {origin}, "Access-Control-Request-Method": {"POST"}, "Access-Control-Request-Headers": {"authorization"}}})
		}
		w := preflight(extraOrigin)
		wantStatus(t, w, http.StatusNoContent)
		wantCORS(t, w, extraOrigin)
		if got := w.Header().Get("Access-Control-Allow-Methods"); got != methods {
			t.Errorf("%s: Allow-Methods = %q, want %q", path, got, methods)
		}
		if got := w.Header().Get("Access-Control-Allow-Headers"); !strings.Contains(got, "Authorization") {
			t.Errorf("%s: Allow-Headers = %q, want Authorization", path, got)
		}
		if w.Header().Get("Access-Control-Max-Age") == "" {
			t.Errorf("%s: no Max-Age", path)
		}
		w = preflight(evilOrigin)
		wantStatus(t, w, http.StatusNoContent)
		if path == "/oauth2/token" || path == "/oauth2/revoke" {
			wantCORS(t, w, "")
		} else { // (fourth review) public documents, and userinfo's preflight carries no token
			wantCORS(t, w, evilOrigin)
		}
	}
	// A path that is no CORS endpoint keeps answering OPTIONS 405.
	w := e.do(t, req{method: http.MethodOptions, target: "/oauth2/introspect", header: fromOrigin(spaOrigin)})
	wantStatus(t, w, http.StatusMethodNotAllowed)
}

// TestTokenOriginOfAnotherClient: the token endpoint answers for the origins of
// the client the form names: a page of the SPA's origin using the confidential
// client's id is refused before any work (no CORS header), and the code it sent
// still works from the server.
func TestTokenOriginOfAnotherClient(t *testing.T) {
	e := newEnv(t, withSPA)
	code := e.code(t, "alice")
	w := e.postForm(t, "/oauth2/token", codeForm(code), fromOrigin(spaOrigin))
	wantOAuthError(t, w, http.StatusBadRequest, "invalid_request")
	wantCORS(t, w, "")
	w = e.postForm(t, "/oauth2/token", codeForm(code), nil)
	wantStatus(t, w, http.StatusOK)
	// The public client from an origin it does not allow: refused too.
	w = e.postForm(t, "/oauth2/token", spaCodeForm(e.spaCode(t)), fromOrigin(evilOrigin))
	wantOAuthError(t, w, http.StatusBadRequest, "invalid_request")
	wantCORS(t, w, "")
}

// TestPublicClientEndpoints: a public client revokes its tokens with its client_id
// alone, and is refused at introspection.
func TestPublicClientEndpoints(t *testing.T) {
	e := newEnv(t, withSPA)
	w := e.postForm(t, "/oauth2/token", spaCodeForm(e.spaCode(t)), nil)
	wantStatus(t, w, http.StatusOK)
	m := decode(t, w)
	access, _ := m["access_token"].(string)
	rt, _ := m["refresh_token"].(string)
	w = e.postForm(t, "/oauth2/introspect", url.Values{"client_id": {spaID}, "token": {access}}, nil)
	wantOAuthError(t, w, http.StatusUnauthorized, "invalid_client")
	w = e.postForm(t, "/oauth2/revoke", url.Values{"client_id": {spaID}, "token": {rt}}, fromOrigin(spaOrigin))
	wantStatus(t, w, http.StatusOK)
	wantCORS(t, w, spaOrigin)
	w = e.postForm(t, "/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {spaID}, "refresh_token": {rt}}, nil)
	wantOAuthError(t, w, http.StatusBadRequest, "invalid_grant")
	w = e.do(t, req{method: http.MethodGet, target: "/oauth2/userinfo", header: http.Header{"Authorization": {"Bearer " + access}}})
	wantStatus(t, w, http.StatusUnauthorized)
}
