package edge_test

import (
	"net/http"
	"testing"
)

// TestCORSOn405 (fourth review, a later pass): a method a CORS route does not
// serve is answered 405 with the route's CORS headers, so that a page on another
// origin can read why it was refused (GET /oauth2/token, PUT /oauth2/userinfo);
// a route without CORS, and an origin the route does not allow, get none.
func TestCORSOn405(t *testing.T) {
	e := newEnv(t, withSPA)
	for _, c := range []struct {
		method, target, origin, want string
	}{
		{http.MethodGet, "/oauth2/token", spaOrigin, spaOrigin},
		{http.MethodGet, "/oauth2/revoke", extraOrigin, extraOrigin},
		{http.MethodPut, "/oauth2/userinfo", evilOrigin, evilOrigin},
		{http.MethodPost, "/oauth2/jwks", evilOrigin, evilOrigin},
		{http.MethodDelete, "/v1/human/leaderboard", evilOrigin, evilOrigin},
		{http.MethodGet, "/oauth2/token", evilOrigin, ""},
		{http.MethodGet, "/oauth2/introspect", spaOrigin, ""},
		{http.MethodGet, "/v1/agent/register/init", spaOrigin, ""},
	} {
		w := e.do(t, req{method: c.method, target: c.target, header: fromOrigin(c.origin)})
		wantStatus(t, w, http.StatusMethodNotAllowed)
		if got := w.Header().Get("Access-Control-Allow-Origin"); got != c.want {
			t.Errorf("%s %s from %s: Access-Control-Allow-Origin %q, want %q", c.method, c.target, c.origin, got, c.want)
		}
		if c.want != "" && !hasVary(w.Header(), "Origin") {
			t.Errorf("%s %s: no Vary: Origin", c.method, c.target)
		}
		if w.Header().Get("Allow") == "" {
			t.Errorf("%s %s: no Allow", c.method, c.target)
		}
	}
}
