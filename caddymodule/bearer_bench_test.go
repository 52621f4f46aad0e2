package caddymodule

import (
	"context"
	"net/http"
	"net/http/httptest"
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

// BenchmarkBearerAdmit is what palmgate_bearer itself adds to a request it
// admits with a token it has seen before (bench's "cached" scenario, less what
// Caddy and the reverse proxy do): the cached verification, the decision's
// counter, the identity headers and the placeholders, on a request prepared as
// Caddy's server prepares it.
func BenchmarkBearerAdmit(b *testing.B) {
	const issuer = "https://id.example.test/oauth2"
	set, err := keys.Open(context.Background(), memstore.New(), time.Now, keys.WithGenerator(keystest.Generator))
	if err != nil {
		b.Fatal(err)
	}
	token, err := set.Sign(keys.ES256, bearer.TokenType, bearer.Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: issuer, Subject: "pairwise-sub", ID: "jti-1",
			IssuedAt: jwt.NewNumericDate(time.Now()), ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour)),
		},
		ClientID: "app", Scope: "openid", GrantID: "grant-1",
	})
	if err != nil {
		b.Fatal(err)
	}
	mw := &Bearer{Scopes: []string{"openid"}, Realm: "palmgate", logger: zap.NewNop(),
		verifier: bearer.NewVerifier(bearer.Config{Issuer: issuer, Algorithm: keys.ES256, Keys: set})}
	initMetrics()
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/cached/x", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), w, &caddyhttp.Server{})
	// The same request each time: the headers and placeholders it sets replace
	// the last ones, so every iteration does the same work.
	b.ReportAllocs()
	for b.Loop() {
		if err := mw.ServeHTTP(w, r, next); err != nil {
			b.Fatal(err)
		}
	}
	if got := r.Header.Get("X-Palmgate-Sub"); got != "pairwise-sub" {
		b.Fatalf("X-Palmgate-Sub %q after the middleware, want pairwise-sub", got)
	}
}
