package caddymodule

import (
	"strings"
	"testing"
)

// TestSSOSessionOption pins `sso_session <duration> | off` (issue 21): its JSON,
// its default (off: absent), and the errors that name it.
func TestSSOSessionOption(t *testing.T) {
	wrap := func(line string) string {
		return "{\n\tpalmgate {\n\t\tissuer https://id.example.com\n\t\tdev\n\t\t" + line + "\n\t}\n}\n:8080 {\n\tpalmgate\n}\n"
	}
	for _, tc := range []struct{ line, want string }{
		{"sso_session 12h", `"sso_session":43200000000000`},
		{"sso_session 30m", `"sso_session":1800000000000`},
	} {
		got, err := adapt(t, wrap(tc.line))
		if err != nil || !strings.Contains(string(got), tc.want) {
			t.Errorf("%s: adapted %s, %v; want %s", tc.line, got, err, tc.want)
		}
	}
	for _, line := range []string{"sso_session off", "access_token_ttl 1h"} {
		got, err := adapt(t, wrap(line))
		if err != nil || strings.Contains(string(got), "sso_session") {
			t.Errorf("%s: adapted %s, %v; want no sso_session (off, the default)", line, got, err)
		}
	}
	for _, line := range []string{"sso_session", "sso_session soon", "sso_session -1h", "sso_session 0s", "sso_session 1h 2h"} {
		if _, err := adapt(t, wrap(line)); err == nil || !strings.Contains(err.Error(), "sso_session") {
			t.Errorf("%s: error %v, want one naming sso_session", line, err)
		}
	}
	a := &App{Issuer: "https://id.example.com", Dev: true}
	a.setDefaults()
	a.SSOSession = 1000000000 // 1s: shorter than a sign-in
	if err := a.Validate(); err == nil || !strings.Contains(err.Error(), "sso_session") {
		t.Errorf("Validate(sso_session 1s) = %v, want an error naming sso_session", err)
	}
}
