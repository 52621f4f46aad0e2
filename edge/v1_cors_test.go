package edge_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestV1PublicReadsCORS (fourth review): the spec lets anyone verify a signature,
// look an agent up and read the leaderboard, so a page on any origin (a
// dashboard, a verifier widget) may read those answers: the origin is echoed
// with Vary: Origin, never credentials, and verify/signature's JSON POST gets its
// preflight. Before, no /v1 route had CORS, so a browser hid every answer from
// such a page. The routes that carry a capability or a cookie (registration
// init, status, the registration page and decline, the agents page and its
// forms, the scan routes) stay without CORS.
func TestV1PublicReadsCORS(t *testing.T) {
	e := newEnv(t)
	a := newAgent("cors-agent")
	e.register(t, a, "alice")
	const origin = "https://dashboard.example.org"

	reads := []req{
		{method: http.MethodGet, target: "/v1/agent/verify/device/cors-agent"},
		{method: http.MethodGet, target: "/v1/agent/verify/public-key/" + url.PathEscape(a.publicKey())},
		{method: http.MethodGet, target: "/v1/human/leaderboard"},
		{method: http.MethodPost, target: "/v1/agent/verify/signature", body: string(mustJSON(t, a.signed("hello", e.clock.Now().UnixMilli()))), contentType: "application/json"},
	}
	for _, rq := range reads {
		rq.header = fromOrigin(origin)
		w := e.do(t, rq)
		if w.Code != http.StatusOK {
			t.Fatalf("%s %s: status %d: %s", rq.method, rq.target, w.Code, w.Body)
		}
		wantCORS(t, w, origin)
		if w.Header().Get("Access-Control-Allow-Credentials") != "" {
			t.Errorf("%s: Access-Control-Allow-Credentials set", rq.target)
		}
		if !hasVary(w.Header(), "Origin") {
			t.Errorf("%s: no Vary: Origin", rq.target)
		}
		// Its preflight, for the JSON POST and any other request a page makes.
		pre := e.do(t, req{method: http.MethodOptions, target: rq.target, header: http.Header{
			"Origin": {origin}, "Access-Control-Request-Method": {rq.method}, "Access-Control-Request-Headers": {"content-type"}}})
		wantStatus(t, pre, http.StatusNoContent)
		if got := pre.Header().Get("Access-Control-Allow-Methods"); !strings.Contains(got, rq.method) {
			t.Errorf("%s preflight: Allow-Methods = %q", rq.target, got)
		}
		if pre.Header().Get("Access-Control-Allow-Origin") != origin {
			t.Errorf("%s preflight: Allow-Origin = %q", rq.target, pre.Header().Get("Access-Control-Allow-Origin"))
		}
	}
	// An error of a public read is readable too (the page learns why).
	w := e.do(t, req{method: http.MethodGet, target: "/v1/agent/verify/public-key/not-a-key", header: fromOrigin(origin)})
	wantStatus(t, w, http.StatusBadRequest)
	wantCORS(t, w, origin)

	// The routes with a capability or a cookie answer no origin.
	private := []req{
		{method: http.MethodPost, target: "/v1/agent/register/init", body: string(mustJSON(t, newAgent("cors-b").registration(e.clock.Now()))), contentType: "application/json"},
		{method: http.MethodGet, target: "/v1/agent/register/nosuch/status"},
		{method: http.MethodGet, target: "/v1/human/agents"},
		{method: http.MethodOptions, target: "/v1/agent/register/init"},
		{method: http.MethodOptions, target: "/v1/human/agents/remove"},
	}
	for _, rq := range private {
		rq.header = fromOrigin(origin)
		if rq.method == http.MethodOptions {
			rq.header.Set("Access-Control-Request-Method", http.MethodPost)
		}
		wantCORS(t, e.do(t, rq), "")
	}
}

func hasVary(h http.Header, v string) bool {
	for _, x := range h.Values("Vary") {
		if x == v {
			return true
		}
	}
	return false
}
