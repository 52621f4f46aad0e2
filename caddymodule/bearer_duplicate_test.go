package caddymodule

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/internal/keystest"
	"github.com/palmgate/palmgate/storage/memstore"
)

// TestBearerDuplicateAuthorization (third review, finding 2): a request with two
// Authorization headers, a valid token first and anything second, was admitted
// on the first while the upstream received both; one that reads the last (or
// decodes the token it finds there, trusting the middleware) acted on a token
// nobody checked. RFC 6750 3.1: a request that repeats the credentials is
// invalid_request, 400; nothing reaches the upstream.
func TestBearerDuplicateAuthorization(t *testing.T) {
	const issuer = "https://id.example.test/oauth2"
	set, err := keys.Open(context.Background(), memstore.New(), time.Now, keys.WithGenerator(keystest.Generator))
	if err != nil {
		t.Fatal(err)
	}
	token, err := set.Sign(keys.ES256, bearer.TokenType, bearer.Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: issuer, Subject: "pairwise-sub", ID: "jti-1",
			IssuedAt: jwt.NewNumericDate(time.Now()), ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour)),
		},
		ClientID: "app", Scope: "openid", GrantID: "grant-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	mw := &Bearer{Realm: "palmgate", logger: zap.NewNop(),
		verifier: bearer.NewVerifier(bearer.Config{Issuer: issuer, Algorithm: keys.ES256, Keys: set})}
	initMetrics()
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
