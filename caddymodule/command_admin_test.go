package caddymodule

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/pflag"
)

// TestAdminMessage: an admin API error that starts with a field names the flag
// that sets it instead; other messages pass unchanged, on one line.
func TestAdminMessage(t *testing.T) {
	for in, want := range map[string]string{
		`redirect_uri "ftp://x/cb": scheme must be https`: `--redirect-uri "ftp://x/cb": scheme must be https`,
		"redirect_uris: 1 to 10 URIs":                     "--redirect-uri: 1 to 10 URIs",
		"name: 1 to 100 characters on one line":           "--name: 1 to 100 characters on one line",
		`post_logout_redirect_uri "x": must be absolute`:  `--post-logout-redirect-uri "x": must be absolute`,
		"id_token_signed_response_alg: HS256":             "--id-token-alg: HS256",
		"grace: time: invalid duration":                   "--grace: time: invalid duration",
		`alg: "XX" is not a signing algorithm`:            `--alg: "XX" is not a signing algorithm`,
		"owner must be a developer's id":                  "<owner> must be a developer's id",
		`no client "pg_x"`:                                `no client "pg_x"`,
		"a message\non two lines":                         "a message on two lines",
		"nameless":                                        "nameless",
	} {
		if got := adminMessage(in); got != want {
			t.Errorf("adminMessage(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCLITime: times print as RFC 3339 in UTC to the second.
func TestCLITime(t *testing.T) {
	for in, want := range map[string]string{
		"2026-11-27T03:28:37.168339771Z": "2026-11-27T03:28:37Z",
		"2026-11-26T03:45:40.437Z":       "2026-11-26T03:45:40Z",
		"2026-11-26T05:45:40.437+02:00":  "2026-11-26T03:45:40Z",
		"2026-11-26T03:45:40Z":           "2026-11-26T03:45:40Z",
		"not a time":                     "not a time",
	} {
		if got := cliTime(in); got != want {
			t.Errorf("cliTime(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestAdminAPIResponseNotAdmin: answers that Caddy's admin API would not give
// (a site's page, its JSON error, an empty 200) are told apart from the admin
// API's own errors.
func TestAdminAPIResponseNotAdmin(t *testing.T) {
	for _, tc := range []struct {
		name, contentType, body string
		status                  int
		want                    string
	}{
		{"empty 200", "", "", 200, "is not Caddy's admin API: it answered 200 with no content type"},
		{"HTML page", "text/html; charset=utf-8", "<p>hi</p>", 200, "it answered 200 with text/html"},
		{"a site's JSON error", "application/json", `{"error":"not_found","error_description":"no such page"}`, 404, "it answered 404 with application/json"},
		{"a site's 404 text", "text/plain", "404 page not found", 404, "it answered 404 with text/plain"},
		{"the admin API's error", "application/json", `{"error":"name: 1 to 100 characters on one line"}`, 400, "--name: 1 to 100 characters on one line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.contentType != "" {
					w.Header().Set("Content-Type", tc.contentType)
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			fs.String("address", strings.TrimPrefix(srv.URL, "http://"), "")
			fs.String("config", "", "")
			fs.String("adapter", "", "")
			_, err := callAdminAPI(caddycmd.Flags{FlagSet: fs}, http.MethodGet, "/palmgate/clients", nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
