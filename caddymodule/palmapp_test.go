package caddymodule

import (
	"strings"
	"testing"
)

// TestCaddyfilePalmAppURL: `palm_app_url <url>` sets where a person gets the palm
// app; a missing or extra argument, and a URL that is not absolute https (http
// only in dev mode), are refused naming the option.
func TestCaddyfilePalmAppURL(t *testing.T) {
	wrap := func(line string) string {
		return "{\n\tpalmgate {\n\t\tissuer https://id.example.com\n\t\tpalm_attestor engine k\n\t\t" + line + "\n\t}\n}\n:8080 {\n\tpalmgate\n}\n"
	}
	got, err := adapt(t, wrap("palm_app_url https://apps.example.com/palm"))
	if err != nil || !strings.Contains(string(got), `"palm_app_url":"https://apps.example.com/palm"`) {
		t.Errorf("adapted to %s, %v; want palm_app_url", got, err)
	}
	for _, line := range []string{"palm_app_url", "palm_app_url https://a.example https://b.example"} {
		if _, err := adapt(t, wrap(line)); err == nil || !strings.Contains(err.Error(), "palm_app_url") {
			t.Errorf("%q: error = %v, want one naming palm_app_url", line, err)
		}
	}
	for _, tc := range []struct {
		url string
		dev bool
		ok  bool
	}{
		{"https://apps.example.com/palm", false, true},
		{"", false, true},
		{"http://apps.example.com/palm", true, true},
		{"http://apps.example.com/palm", false, false},
		{"javascript:alert(1)", false, false},
		{"/relative", false, false},
		{"https://user:pw@apps.example.com/", false, false},
		{"ftp://apps.example.com/", false, false},
	} {
		a := &App{Issuer: "https://id.example.com", PalmAttestors: []PalmAttestor{{Name: "engine", PublicKey: "k"}}, PalmAppURL: tc.url, Dev: tc.dev}
		a.setDefaults()
		err := a.Validate()
		if tc.ok && err != nil {
			t.Errorf("palm_app_url %q (dev %v) refused: %v", tc.url, tc.dev, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "palm_app_url")) {
			t.Errorf("palm_app_url %q (dev %v): error = %v, want one naming palm_app_url", tc.url, tc.dev, err)
		}
	}
}
