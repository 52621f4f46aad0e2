package caddymodule

import (
	"context"
	"crypto"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/keys"
)

// TestBearerDuplicateAuthorization (third review, finding 2): a request with two
// Authorization headers, a valid token first and anything second, was admitted
// on the first while the upstream received both; one that reads the last (or
// decodes the token it finds there, trusting the middleware) acted on a token
// nobody checked. RFC 6750 3.1: a request that repeats the credentials is
// invalid_request, 400; nothing reaches the upstream.
func TestBearerDuplicateAuthorization(t *testing.T) {
	mw, token := newTestBearer(t)
	serve := func(auth ...string) (bool, error, http.Header) {
		reached := false
		next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { reached = true; return nil })
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/api", nil)
		r.Header["Authorization"] = auth
		r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), w, &caddyhttp.Server{})
		err := mw.ServeHTTP(w, r, next)
		return reached, err, w.Header()
	}
	if reached, err, _ := serve("Bearer " + token); !reached || err != nil {
		t.Fatalf("one Authorization header: reached %v, %v; want admitted", reached, err)
	}
	for _, auth := range [][]string{
		{"Bearer " + token, "Bearer forged.token.here"},
		{"Bearer " + token, "Bearer " + token},
		{"Bearer " + token, "Basic dXNlcjpwYXNz"},
	} {
		reached, err, h := serve(auth...)
		var he caddyhttp.HandlerError
		if reached || !errors.As(err, &he) || he.StatusCode != http.StatusBadRequest {
			t.Errorf("%d Authorization headers (second %.12q): reached %v, %v; want 400 before the upstream", len(auth), auth[1], reached, err)
		}
		if ch := h.Get("WWW-Authenticate"); !strings.Contains(ch, `error="invalid_request"`) {
			t.Errorf("WWW-Authenticate = %q, want error=\"invalid_request\" (RFC 6750 3.1)", ch)
		}
	}
}

// TestBearerRefusalDropsIdentityHeaders (third review, finding 8): a refused
// request kept the client's X-Palmgate-* headers: the middleware deleted them only
// when it admitted one. Caddy hands the same request to handle_errors, so a site
// whose error routes proxy to the application (a sign-in or error page it
// renders) gave it a forged X-Palmgate-Sub with no token at all.
func TestBearerRefusalDropsIdentityHeaders(t *testing.T) {
	mw := &Bearer{Realm: "palmgate", logger: zap.NewNop(),
		verifier: bearer.NewVerifier(bearer.Config{Issuer: testIssuer, Algorithm: keys.ES256, Keys: noKeys{}})}
	initMetrics()
	for _, auth := range []string{"", "Bearer not.a.token"} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/api", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		r.Header.Set("X-Palmgate-Sub", "victim")
		r.Header["X_palmgate_client_id"] = []string{"app"}
		r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), w, &caddyhttp.Server{})
		next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { t.Fatal("admitted"); return nil })
		if err := mw.ServeHTTP(w, r, next); err == nil {
			t.Fatalf("Authorization %q: admitted", auth)
		}
		for name := range r.Header {
			if strings.Contains(strings.ToLower(strings.ReplaceAll(name, "_", "-")), "x-palmgate-") {
				t.Errorf("Authorization %q: refused, and %s: %q still on the request handle_errors gets", auth, name, r.Header[name])
			}
		}
	}
}

// noKeys is a key source with no key.
type noKeys struct{}

func (noKeys) Key(context.Context, string) (crypto.PublicKey, string, error) {
	return nil, "", bearer.ErrInvalidToken
}
