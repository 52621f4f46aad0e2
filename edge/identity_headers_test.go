package edge_test

import (
	"bufio"
	"net/http"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	corebearer "github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/edge"
)

// cgiName is the variable a header becomes under CGI, FastCGI (Caddy's
// php_fastcgi), WSGI and Rack: HTTP_ and the name upper-cased, '-' as '_'.
func cgiName(field string) string {
	return "HTTP_" + strings.ReplaceAll(strings.ToUpper(field), "-", "_")
}

// TestIdentityHeadersSpelledOtherwise (third review, finding 1): a client sends
// X_Palmgate_Sub (underscores, any case), which net/http keeps as a header of its
// own; SetIdentityHeaders deleted only X-Palmgate-Sub, so the forged copy went on
// to the upstream, and CGI, FastCGI, WSGI and Rack upstreams read both as
// HTTP_X_PALMGATE_SUB (Caddy's FastCGI transport takes whichever comes last in map
// order). After SetIdentityHeaders no header but palmgate's own may name an
// identity variable.
func TestIdentityHeadersSpelledOtherwise(t *testing.T) {
	raw := "GET / HTTP/1.1\r\nHost: rs.example\r\n" +
		"X_Palmgate_Sub: forged-sub\r\n" +
		"x_palmgate_scope: admin\r\n" +
		"X-PALMGATE_CLIENT-ID: forged-client\r\n" +
		"x_PALMGATE_agent_ID: forged-agent\r\n" +
		"X-Palmgate-Sub: forged-too\r\n" +
		"X-Other: kept\r\n\r\n"
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
	if err != nil {
		t.Fatal(err)
	}
	edge.SetIdentityHeaders(r.Header, &corebearer.Claims{ClientID: "app", Scope: "openid", RegisteredClaims: jwt.RegisteredClaims{Subject: "pairwise"}})
	vars := map[string][]string{}
	for field, values := range r.Header {
		vars[cgiName(field)] = append(vars[cgiName(field)], values...)
	}
	for name, want := range map[string]string{
		"HTTP_X_PALMGATE_SUB": "pairwise", "HTTP_X_PALMGATE_SCOPE": "openid",
		"HTTP_X_PALMGATE_CLIENT_ID": "app", "HTTP_X_OTHER": "kept",
	} {
		if got := vars[name]; len(got) != 1 || got[0] != want {
			t.Errorf("%s = %q, want only %q (headers %v)", name, got, want, r.Header)
		}
	}
	if got := vars["HTTP_X_PALMGATE_AGENT_ID"]; len(got) != 0 {
		t.Errorf("HTTP_X_PALMGATE_AGENT_ID = %q for a person's own token, want none (headers %v)", got, r.Header)
	}
}

// TestCheckDuplicateAuthorization (third review, finding 2): /oauth2/check and
// userinfo refuse a request with two Authorization headers (a valid token and
// another) with 400 invalid_request, RFC 6750 3.1, instead of judging the first
// while the gateway forwards both.
func TestCheckDuplicateAuthorization(t *testing.T) {
	e := newEnv(t)
	access := e.tokens(t, "alice")["access_token"].(string)
	for _, target := range []string{"/oauth2/check", "/oauth2/userinfo"} {
		wantStatus(t, e.do(t, req{method: http.MethodGet, target: target, header: bearer(access)}), http.StatusOK)
		h := http.Header{"Authorization": {"Bearer " + access, "Bearer forged"}}
		w := e.do(t, req{method: http.MethodGet, target: target, header: h})
		wantChallenge(t, w, http.StatusBadRequest, "invalid_request")
		if w.Header().Get("X-Palmgate-Sub") != "" {
			t.Errorf("%s: X-Palmgate-Sub %q on a refusal", target, w.Header().Get("X-Palmgate-Sub"))
		}
	}
}

// TestCheckTokenInTwoPlaces: a request that sends a token in the Authorization
// header and another as the access_token query parameter (RFC 6750 2: one method
// per request) is invalid_request, not judged on the header while the query's
// token goes on to the upstream; a query that merely mentions the name passes.
func TestCheckTokenInTwoPlaces(t *testing.T) {
	e := newEnv(t)
	access := e.tokens(t, "alice")["access_token"].(string)
	for _, target := range []string{"/oauth2/userinfo?access_token=forged", "/oauth2/check?scope=openid&access_token=forged"} {
		w := e.do(t, req{method: http.MethodGet, target: target, header: bearer(access)})
		wantChallenge(t, w, http.StatusBadRequest, "invalid_request")
		if w.Header().Get("X-Palmgate-Sub") != "" {
			t.Errorf("%s: X-Palmgate-Sub %q on a refusal", target, w.Header().Get("X-Palmgate-Sub"))
		}
	}
	for _, target := range []string{"/oauth2/userinfo?note=access_token", "/oauth2/check?scope=openid"} {
		wantStatus(t, e.do(t, req{method: http.MethodGet, target: target, header: bearer(access)}), http.StatusOK)
	}
}

// TestIdentityHeaderNamesCanonical: PutIdentityHeaders assigns the header map
// directly, so each name must already be in the form Get, the upstream request's
// writer and every other reader look it up by.
func TestIdentityHeaderNamesCanonical(t *testing.T) {
	h := http.Header{}
	claims := &corebearer.Claims{ClientID: "app", Scope: "openid", RegisteredClaims: jwt.RegisteredClaims{Subject: "pairwise"},
		Act: &corebearer.Actor{Subject: "agent-1"}}
	edge.PutIdentityHeaders(h, claims)
	for name, want := range map[string]string{edge.HeaderSub: "pairwise", edge.HeaderScope: "openid", edge.HeaderClientID: "app", edge.HeaderAgentID: "agent-1"} {
		if canonical := http.CanonicalHeaderKey(name); canonical != name {
			t.Errorf("%q is not canonical (%q)", name, canonical)
		}
		if got := h.Get(name); got != want {
			t.Errorf("Get(%q) = %q after PutIdentityHeaders, want %q", name, got, want)
		}
	}
}
