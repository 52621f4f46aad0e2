package demo

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/caddyauth"
	"go.uber.org/zap"
	"golang.org/x/oauth2"
)

var testKey = bytes.Repeat([]byte{7}, 32)

func testState(now time.Time) loginState {
	return loginState{State: "state-1", Nonce: "nonce-1", Verifier: oauth2.GenerateVerifier(), Expires: now.Add(cookieTTL).Unix()}
}

func TestCookieRoundTrip(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	st := testState(now)
	value, err := sealState(testKey, st)
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(value, " ;,\"\\") {
		t.Errorf("cookie value %q has characters a cookie cannot carry", value)
	}
	got, err := openState(testKey, value, now.Add(cookieTTL-time.Second))
	if err != nil {
		t.Fatalf("openState: %v", err)
	}
	if got != st {
		t.Errorf("openState = %+v, want %+v", got, st)
	}
}

func TestCookieRefused(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	good, err := sealState(testKey, testState(now))
	if err != nil {
		t.Fatal(err)
	}
	body, sig, _ := strings.Cut(good, ".")
	forged, _ := json.Marshal(loginState{State: "attacker", Nonce: "n", Verifier: "v", Expires: now.Add(time.Hour).Unix()})
	forgedBody := strings.TrimRight(strings.NewReplacer("+", "-", "/", "_").Replace(string(mustB64(forged))), "=")
	noVerifier, _ := sealState(testKey, loginState{State: "s", Nonce: "n", Expires: now.Add(time.Hour).Unix()})
	// flip changes the first character, staying in the alphabet. (Not the last: in
	// unpadded base64 its low bits are padding, so a change there can decode to the
	// same bytes, which made this test flaky.)
	flip := func(s string) string {
		repl := byte('A')
		if s[0] == 'A' {
			repl = 'B'
		}
		return string(repl) + s[1:]
	}
	for _, tc := range []struct {
		name, value string
		at          time.Time
		want        error
	}{
		{"empty", "", now, errBadCookie},
		{"no signature", body, now, errBadCookie},
		{"payload changed", flip(body) + "." + sig, now, errBadCookie},
		{"signature changed", body + "." + flip(sig), now, errBadCookie},
		{"signature not base64url", body + ".!!!", now, errBadCookie},
		{"forged payload, old signature", forgedBody + "." + sig, now, errBadCookie},
		{"signature truncated", body + "." + sig[:10], now, errBadCookie},
		{"too long", body + strings.Repeat("A", maxCookieLen) + "." + sig, now, errBadCookie},
		{"missing verifier", noVerifier, now, errBadCookie},
		{"expired", good, now.Add(cookieTTL), errExpiredCookie},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := openState(testKey, tc.value, tc.at)
			if err != tc.want {
				t.Fatalf("openState error = %v, want %v", err, tc.want)
			}
			if st != (loginState{}) {
				t.Errorf("openState returned %+v with its error, want the zero state", st)
			}
		})
	}
	t.Run("other key", func(t *testing.T) {
		if _, err := openState(bytes.Repeat([]byte{8}, 32), good, now); err != errBadCookie {
			t.Fatalf("openState with another key: error %v, want %v", err, errBadCookie)
		}
	})
}

func mustB64(b []byte) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	_ = enc.Encode(b) // a []byte encodes as standard base64 in quotes
	return bytes.Trim(bytes.TrimSpace(buf.Bytes()), `"`)
}

func TestCheckCallback(t *testing.T) {
	st := loginState{State: "the-state", Nonce: "n", Verifier: "v"}
	for _, tc := range []struct {
		name       string
		query      string
		wantCode   string
		wantStatus int
		wantTitle  string
	}{
		{"code", "code=abc&state=the-state", "abc", 0, ""},
		{"wrong state", "code=abc&state=other", "", 400, "Login refused"},
		{"no state", "code=abc", "", 400, "Login refused"},
		{"state prefix", "code=abc&state=the-stat", "", 400, "Login refused"},
		{"declined", "error=access_denied&state=the-state", "", 400, "Login was declined"},
		{"declined with a foreign state", "error=access_denied&state=other", "", 400, "Login refused"},
		{"other error", "error=server_error&error_description=boom&state=the-state", "", 400, "Login failed"},
		{"neither code nor error", "state=the-state", "", 400, "Login failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			code, failure := checkCallback(q, st)
			if code != tc.wantCode {
				t.Errorf("code = %q, want %q", code, tc.wantCode)
			}
			switch {
			case tc.wantStatus == 0 && failure != nil:
				t.Errorf("failure = %+v, want none", failure)
			case tc.wantStatus != 0 && failure == nil:
				t.Errorf("no failure, want %d %q", tc.wantStatus, tc.wantTitle)
			case failure != nil && (failure.Status != tc.wantStatus || failure.Title != tc.wantTitle):
				t.Errorf("failure = %d %q, want %d %q", failure.Status, failure.Title, tc.wantStatus, tc.wantTitle)
			}
		})
	}
}

func TestDescribeTokenShowsNoTokenValue(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	tok := (&oauth2.Token{
		AccessToken:  "eyJhY2Nlc3M.secret-access",
		TokenType:    "Bearer",
		RefreshToken: "eyJyZWZyZXNo.secret-refresh",
		Expiry:       now.Add(time.Hour),
	}).WithExtra(map[string]any{
		"scope":                    "openid offline_access",
		"id_token":                 "eyJpZA.secret-id",
		"refresh_token_expires_in": float64(90 * 24 * 3600),
	})
	f := describeToken(tok, now)
	if f.Type != "Bearer" || strings.Join(f.Scopes, " ") != "openid offline_access" || !f.Refresh {
		t.Errorf("describeToken = %+v", f)
	}
	if f.Expiry != "2027-01-15T09:00:00Z" || f.ExpiresIn != "1h0m0s" {
		t.Errorf("expiry %q in %q, want 2027-01-15T09:00:00Z in 1h0m0s", f.Expiry, f.ExpiresIn)
	}
	if f.RefreshUntil != now.Add(90*24*time.Hour).UTC().Format(time.RFC3339) {
		t.Errorf("RefreshUntil = %q", f.RefreshUntil)
	}
	if s := prettyJSON(f); strings.Contains(s, "secret") || strings.Contains(s, "eyJ") {
		t.Errorf("token facts reveal a token: %s", s)
	}
}

func TestRenderIsolatesEachResponse(t *testing.T) {
	d := &Demo{clientName: "demo", issuer: "http://localhost:8080", origin: "http://localhost:8080"}
	nonces := map[string]bool{}
	for range 2 {
		rec := httptest.NewRecorder()
		d.render(rec, http.StatusOK, page{Kind: "result", Sub: `<script>alert(1)</script>`, IDClaims: `{"sub": "x"}`, LoginURL: "/demo/login"})
		csp := rec.Header().Get("Content-Security-Policy")
		m := regexp.MustCompile(`style-src 'nonce-([A-Za-z0-9_-]{22})'`).FindStringSubmatch(csp)
		if m == nil || !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
			t.Fatalf("CSP %q: want default-src 'none' and a style nonce, no script source", csp)
		}
		nonces[m[1]] = true
		body := rec.Body.String()
		if !strings.Contains(body, `<style nonce="`+m[1]+`">`) {
			t.Errorf("the style element does not carry the CSP nonce %s", m[1])
		}
		if strings.Contains(body, "<script>") || !strings.Contains(body, "&lt;script&gt;") {
			t.Errorf("the sub is not escaped:\n%s", body)
		}
		if rec.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("Cache-Control %q, want no-store", rec.Header().Get("Cache-Control"))
		}
	}
	if len(nonces) != 2 {
		t.Errorf("two responses shared a CSP nonce")
	}
}

func TestUnmarshalCaddyfile(t *testing.T) {
	for _, tc := range []struct {
		name, input, wantID, wantErr string
	}{
		{"client id", "palmgate_demo demo", "demo", ""},
		{"no client id", "palmgate_demo", "", "client_id is required"},
		{"two arguments", "palmgate_demo demo other", "", "wrong argument count"},
		{"block", "palmgate_demo demo {\n\tsecret x\n}", "", "takes no block"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d Demo
			err := d.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
			if tc.wantErr == "" {
				if err != nil || d.ClientID != tc.wantID {
					t.Fatalf("ClientID %q, error %v; want %q", d.ClientID, err, tc.wantID)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestCallbackShowsTheErrorReceived: a callback carrying palmgate's error (an
// invalid_scope, say) shows that error and its description, escaped and
// bounded, even when the browser has no login in progress, instead of "No login
// in progress".
func TestCallbackShowsTheErrorReceived(t *testing.T) {
	d := &Demo{clientName: "demo", issuer: "http://localhost:8080", origin: "http://localhost:8080", logger: zap.NewNop()}
	q := url.Values{"error": {"invalid_scope"}, "error_description": {"scope <b>nope</b> is not allowed" + strings.Repeat("y", 1000)}, "state": {"s"}}
	rec := httptest.NewRecorder()
	d.serveCallback(rec, httptest.NewRequest(http.MethodGet, pathCallback+"?"+q.Encode(), nil))
	body := rec.Body.String()
	if rec.Code != http.StatusBadRequest || !strings.Contains(body, "invalid_scope") || !strings.Contains(body, "scope &lt;b&gt;nope&lt;/b&gt; is not allowed") {
		t.Errorf("status %d; the page does not show the error received:\n%s", rec.Code, body)
	}
	if strings.Contains(body, "<b>nope") || strings.Contains(body, strings.Repeat("y", 301)) {
		t.Errorf("the description is not escaped and bounded:\n%s", body)
	}
	if strings.Contains(body, "No login in progress") {
		t.Errorf("the page hides the error behind \"No login in progress\":\n%s", body)
	}
}
