package caddymodule

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestIssuerTrailingSlashWarns: an issuer written with a trailing slash is served
// without it (the iss relying parties see, and must be configured with), and
// provisioning says so rather than trimming it without a word.
func TestIssuerTrailingSlashWarns(t *testing.T) {
	for _, tc := range []struct {
		issuer string
		warn   bool
	}{
		{"https://id.example.test/", true},
		{"https://id.example.test", false},
	} {
		core, logs := observer.New(zap.WarnLevel)
		a := &App{Issuer: tc.issuer}
		a.warnIssuerSlash(zap.New(core))
		a.setDefaults()
		if a.Issuer != "https://id.example.test" {
			t.Errorf("issuer %q served as %q", tc.issuer, a.Issuer)
		}
		got := logs.FilterMessageSnippet("trailing slash").AllUntimed()
		if !tc.warn {
			if len(got) != 0 {
				t.Errorf("issuer %q: warned %q", tc.issuer, got[0].Message)
			}
			continue
		}
		if len(got) != 1 || !strings.Contains(got[0].Message, "iss") || got[0].ContextMap()["iss"] != "https://id.example.test" {
			t.Errorf("issuer %q: warnings %v, want one naming the iss relying parties see, https://id.example.test", tc.issuer, logs.AllUntimed())
		}
	}
}
