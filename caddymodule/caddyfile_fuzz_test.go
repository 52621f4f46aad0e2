package caddymodule

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// validateErrorPrefixes are how App.Validate's messages start: the option at fault,
// or palmgate itself.
var validateErrorPrefixes = []string{
	"issuer", "storage", "dev", "palm_attestor", "pairwise_secret", "access_token_ttl",
	"refresh_token_ttl", "auth_code_ttl", "login_ttl", "rate_limit", "registration_session_ttl",
	"challenge_max_age", "sso_session", "client", "palmgate", "key_rotation", "palm_app_url",
	"brand", "resources", "registration", "client_metadata_documents", "portal",
	"max_pending_logins", "max_pending_registrations",
}

// FuzzCaddyfileGlobalOption: the body of the `palmgate { ... }` global option, run
// through the real Caddyfile adapter, never panics; when it adapts, the palmgate app
// is there, its JSON has only App's fields, and App.Validate (after the defaults
// Provision sets) passes or names the option at fault. Seeds: the block of
// testdata/full.caddyfile and testdata/fuzz/FuzzCaddyfileGlobalOption/.
func FuzzCaddyfileGlobalOption(f *testing.F) {
	full, err := os.ReadFile("testdata/full.caddyfile")
	if err != nil {
		f.Fatal(err)
	}
	text := string(full)
	start := strings.Index(text, "palmgate {\n")
	end := strings.Index(text, "\n\t}\n}")
	if start < 0 || end < start {
		f.Fatal("testdata/full.caddyfile: no palmgate { ... } block")
	}
	f.Add(text[start+len("palmgate {\n") : end])
	f.Add("\t\tissuer http://localhost:8080\n\t\tdev")

	f.Fuzz(func(t *testing.T, body string) {
		if strings.Contains(body, "import") {
			t.Skip("import reads files: outside this target")
		}
		caddyfile := "{\n\tpalmgate {\n" + body + "\n\t}\n}\n:8080 {\n\tpalmgate\n}\n"
		raw, err := adapt(t, caddyfile)
		if err != nil {
			return
		}
		if raw == nil {
			t.Fatalf("adapted without a palmgate app:\n%s", caddyfile)
		}
		var app App
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&app); err != nil {
			t.Fatalf("adapted JSON %s does not decode into App: %v", raw, err)
		}
		app.setDefaults()
		if err := app.Validate(); err != nil {
			msg := err.Error()
			for _, p := range validateErrorPrefixes {
				if strings.HasPrefix(msg, p) {
					return
				}
			}
			t.Fatalf("Validate error names no option: %q", msg)
		}
	})
}
