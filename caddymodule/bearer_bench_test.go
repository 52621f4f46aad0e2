package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// BenchmarkBearerAdmit is what palmgate_bearer itself adds to a request it
// admits with a token it has seen before (bench's "cached" scenario, less what
// Caddy and the reverse proxy do): the cached verification, the decision's
// counter, the identity headers and the placeholders, on a request prepared as
// Caddy's server prepares it.
func BenchmarkBearerAdmit(b *testing.B) {
	mw, token := newTestBearer(b, "openid")
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
