package integration

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/internal/testserver"
)

// TestBearerSmuggledHeaders (third review, findings 2 and 8) through the real
// Caddy: two Authorization headers are 400 and reach nothing; a refused request
// reaches handle_errors without the client's X-Palmgate-Sub. (An admitted
// request's underscore copy of X-Palmgate-Sub does not reach the upstream
// either: Caddy drops underscore headers unless expected_underscore_headers
// admits them, and palmgate_bearer deletes them when it does, finding 1.)
func TestBearerSmuggledHeaders(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	shop := newOIDCClient("shop", "")
	site := "palmgate\n" + u.route("/api/*") +
		"handle_errors {\nrespond \"sub=[{http.request.header.X-Palmgate-Sub}]\"\n}\n"
	e := start(t, oidcOptions([]oidcClient{shop}, site))
	tok := e.tokensFor(t, shop, e.subject("alice"), "openid")

	p := u.call(t, e, "GET", "/api/x", "Bearer "+tok.access, "X_Palmgate_Sub", "forged", "x_palmgate_scope", "admin")
	p.expectAdmitted(t, tok, "Bearer "+tok.access)
	for name, values := range p.seen {
		if n := strings.ToLower(strings.ReplaceAll(name, "_", "-")); strings.HasPrefix(n, "x-palmgate-") && name != http.CanonicalHeaderKey(n) {
			t.Errorf("the upstream saw %s: %q, an underscore copy of an identity header", name, values)
		}
	}

	req, err := http.NewRequest("GET", e.URL+"/api/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header["Authorization"] = []string{"Bearer " + tok.access, "Bearer forged"}
	req.Header.Set("X-Test-Request", "duplicate")
	resp, err := testserver.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	u.mu.Lock()
	_, reached := u.seen["duplicate"]
	u.mu.Unlock()
	if resp.StatusCode != http.StatusBadRequest || reached || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_request"`) {
		t.Errorf("two Authorization headers: %d %q (upstream reached: %v), WWW-Authenticate %q; want 400 invalid_request",
			resp.StatusCode, body, reached, resp.Header.Get("WWW-Authenticate"))
	}

	for _, auth := range []string{"", "Bearer not-a-token"} {
		p := u.call(t, e, "GET", "/api/x", auth, "X-Palmgate-Sub", "victim")
		if p.seen != nil || p.Status != http.StatusUnauthorized || string(p.Body) != "sub=[]" {
			t.Errorf("%s (Authorization %q): %d %q (upstream reached: %v); want 401 and handle_errors without the forged X-Palmgate-Sub",
				p.Request, auth, p.Status, p.Body, p.seen != nil)
		}
	}
}
